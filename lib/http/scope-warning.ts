import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { LibraryLogger } from '../observability/library-logger';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';

/** The warning logged once at startup when HTTP idempotency runs without a configured scope. */
export const MISSING_SCOPE_WARNING =
  'http.scope is not set, so idempotency keys are shared by all clients: anyone who sends another client\'s key gets ' +
  'that client\'s stored response. Set http.scope to a function of the authenticated request, e.g. ' +
  '`scope: (req) => req.user.id` (a scope of undefined is the shared key space: throw for a request without a client), ' +
  'or `scope: "global"` if one shared key space is what you want.';

/**
 * Says once, at startup, that keys are not scoped per client when no `http.scope` was chosen — in an app that serves
 * HTTP: a standalone application context (a worker, a CLI) has no requests to scope.
 */
@Injectable()
export class ScopeWarning implements OnModuleInit {
  private readonly logger: Logger = new LibraryLogger('Idempotency');

  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  onModuleInit(): void {
    // Nest gives a standalone application context no adapter (null)
    const adapter: unknown = this.adapterHost.httpAdapter;
    const servesHttp = adapter !== null && adapter !== undefined;
    if (servesHttp && this.options.http.enabled && this.options.http.scopeDefaulted) this.logger.warn(MISSING_SCOPE_WARNING);
  }
}
