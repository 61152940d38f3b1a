import { CanActivate, ExecutionContext, HttpException, Inject, Injectable, Logger, OnModuleInit, Type } from '@nestjs/common';
import { LibraryLogger } from '../observability/library-logger';
import { HttpAdapterHost, ModuleRef } from '@nestjs/core';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import type { WorkflowStatus } from '../workflow/workflow.interfaces';
import { executionPage, keysPage, workflowsPage } from './console-pages';
import { ConsoleWorkflowFilter, IdempotencyConsole } from './idempotency-console.service';

type Handler = (req: unknown, res: unknown) => Promise<void>;
type Adapter = {
  get(path: string, handler: Handler): unknown;
  post(path: string, handler: Handler): unknown;
  getRequestUrl(req: unknown): string;
  reply(res: unknown, body: unknown, status?: number): unknown;
  setHeader(res: unknown, name: string, value: string): unknown;
  redirect(res: unknown, status: number, url: string): unknown;
};

const STATUSES = new Set(['pending', 'running', 'completed', 'failed', 'cancelled', 'timed_out']);

/**
 * Mounts the web console (`console` option) on the app's HTTP adapter, Express or Fastify: server-rendered pages,
 * no scripts, nothing loaded from elsewhere. Every request passes the configured guard first.
 */
@Injectable()
export class ConsoleRoutes implements OnModuleInit {
  private readonly logger: Logger = new LibraryLogger('Idempotency');

  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly adapterHost: HttpAdapterHost,
    private readonly moduleRef: ModuleRef,
    private readonly operations: IdempotencyConsole,
  ) {}

  async onModuleInit(): Promise<void> {
    const settings = this.options.console;
    const adapter = this.adapterHost.httpAdapter as unknown as Adapter | undefined;
    if (!settings || !adapter) return;
    const guard = settings.guard ? await this.resolveGuard(settings.guard) : undefined;
    const base = settings.path;
    const route = (method: 'get' | 'post', path: string, handle: (url: URL, req: unknown) => Promise<{ html: string } | { redirect: string }>) => {
      adapter[method](`${base}${path}`, async (req, res) => {
        try {
          if (guard && !(await guard.canActivate(httpContext(req, res)))) {
            adapter.setHeader(res, 'content-type', 'text/plain; charset=utf-8');
            adapter.reply(res, 'Forbidden', 403);
            return;
          }
          const outcome = await handle(new URL(adapter.getRequestUrl(req), 'http://console'), req);
          if ('redirect' in outcome) {
            adapter.redirect(res, 303, outcome.redirect);
            return;
          }
          adapter.setHeader(res, 'content-type', 'text/html; charset=utf-8');
          adapter.setHeader(res, 'cache-control', 'no-store');
          adapter.reply(res, outcome.html, 200);
        } catch (err) {
          const status = err instanceof HttpException ? err.getStatus() : 500;
          if (status === 500) this.logger.error(`console: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
          adapter.setHeader(res, 'content-type', 'text/plain; charset=utf-8');
          adapter.reply(res, status === 500 ? 'Console error (see the server log)' : (err as HttpException).message, status);
        }
      });
    };
    const note = (url: URL) => url.searchParams.get('note') ?? undefined;
    const param = (req: unknown, name: string) => String((req as { params?: Record<string, string> }).params?.[name] ?? '');

    route('get', '', async (url) => {
      const filter = parseFilter(url);
      return { html: workflowsPage(base, await this.operations.listWorkflows(filter), filter, note(url)) };
    });
    route('get', '/workflows/:executionId', async (url, req) => {
      const shown = await this.operations.showWorkflow(param(req, 'executionId'));
      if (!shown) return { redirect: `${base}?note=${encodeURIComponent('no such execution')}` };
      return { html: executionPage(base, shown, note(url)) };
    });
    const control = (verb: 'cancel' | 'resume') => async (url: URL, req: unknown) => {
      const workflowId = param(req, 'workflowId');
      let executionId = url.searchParams.get('execution') ?? '';
      let message: string;
      if (verb === 'cancel') {
        message = (await this.operations.cancelWorkflow(workflowId)) ? 'cancelled: the running step finishes, no further step starts' : 'nothing live to cancel';
      } else {
        executionId = await this.operations.resumeWorkflow(workflowId);
        message = 'resumed from its checkpoints';
      }
      return { redirect: `${base}/workflows/${encodeURIComponent(executionId)}?note=${encodeURIComponent(message)}` };
    };
    route('post', '/workflows/:workflowId/cancel', control('cancel'));
    route('post', '/workflows/:workflowId/resume', control('resume'));
    route('get', '/keys', async (url) => {
      const scope = url.searchParams.get('scope') ?? '';
      const key = url.searchParams.get('key') ?? '';
      const records = key ? await this.operations.showKey(scope, key) : undefined;
      return { html: keysPage(base, scope, key, records, note(url)) };
    });
    route('post', '/keys/release', async (url) => {
      const scope = url.searchParams.get('scope') ?? '';
      const key = url.searchParams.get('key') ?? '';
      const released = await this.operations.releaseKey(scope, key);
      const message = released ? 'released: the next request with this key runs' : 'the key had nothing in progress';
      return { redirect: `${base}/keys?scope=${encodeURIComponent(scope)}&key=${encodeURIComponent(key)}&note=${encodeURIComponent(message)}` };
    });
    this.logger.log(`console mounted at ${base}${guard ? '' : ' WITHOUT a guard (console.allowUnguarded)'}`);
  }

  private async resolveGuard(type: Type<CanActivate>): Promise<CanActivate> {
    try {
      return this.moduleRef.get(type, { strict: false });
    } catch {
      return this.moduleRef.create(type);
    }
  }
}

function parseFilter(url: URL): ConsoleWorkflowFilter {
  const date = (name: string) => {
    const value = url.searchParams.get(name);
    if (!value) return undefined;
    const parsed = new Date(/Z$|[+-]\d\d:\d\d$/.test(value) ? value : `${value}Z`); // the form's local times are UTC
    return Number.isNaN(parsed.getTime()) ? undefined : parsed;
  };
  const status = url.searchParams.get('status') ?? '';
  return {
    status: STATUSES.has(status) ? (status as WorkflowStatus) : undefined,
    workflow: url.searchParams.get('workflow') || undefined,
    since: date('since'),
    until: date('until'),
  };
}

/** The ExecutionContext a guard expects, for a request that reaches no controller (no deep import of Nest's own). */
function httpContext(req: unknown, res: unknown): ExecutionContext {
  const args = [req, res, undefined];
  const http = { getRequest: <T>() => req as T, getResponse: <T>() => res as T, getNext: <T>() => undefined as T };
  const unsupported = () => {
    throw new Error('the idempotency console is served over HTTP only');
  };
  return {
    getClass: <T>() => ConsoleRoutes as unknown as T,
    getHandler: () => httpContext,
    getArgs: <T extends unknown[]>() => args as T,
    getArgByIndex: <T>(index: number) => args[index] as T,
    getType: <T extends string>() => 'http' as T,
    switchToHttp: () => http,
    switchToRpc: unsupported,
    switchToWs: unsupported,
  };
}
