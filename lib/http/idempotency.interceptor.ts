import { CallHandler, ExecutionContext, HttpException, Inject, Injectable, Logger, NestInterceptor } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { catchError, defer, lastValueFrom, Observable, throwError } from 'rxjs';
import { Claim } from '../core/idempotency-record';
import { BeginResult, IdempotencyService } from '../core/idempotency.service';
import { BodyNotFingerprintableError } from '../errors/body-not-fingerprintable.error';
import { IdempotencyInputTooLongError } from '../errors/idempotency-input-too-long.error';
import { StoreUnavailableError } from '../errors/store-unavailable.error';
import { REPLAYED_HEADER, RESOLVED_IDEMPOTENCY_OPTIONS, UNPROTECTED_HEADER } from '../idempotency.constants';
import type { IdempotencyRequest } from '../interfaces/idempotency-options.interface';
import type { ResolvedHttpOptions, ResolvedOptions } from '../interfaces/resolved-options';
import { resolveRouteOptions } from '../utils/validate-options';
import { IdempotencyMetadataAccessor } from '../idempotency-metadata.accessor';
import { parseIdempotencyKey } from './idempotency-key';
import { IdempotencyProblemException, PROBLEM_CONTENT_TYPE } from './problem-details';
import { asObservable, HandlerNeverStartedError, HandlerStart, isTrackedHandler } from './handler-start';
import { bodyIsUnread, requestFingerprint } from './request-fingerprint';
import {
  DEFAULT_REPLAY_HEADERS, isUnstorable, pickHeaders, ResponseLike, storeBody, storeExceptionBody, StoredResponse,
} from './stored-response';

/** 2xx and 4xx outcomes are final, except those that ask for a retry; 5xx release the key unless configured otherwise. */
function isFinalStatus(status: number, settings: ResolvedHttpOptions): boolean {
  if (settings.retryableStatuses.has(status)) return false;
  return status < 500 || settings.storeServerErrors;
}

/** Duplicates usually finish in well under a second: hint a short retry rather than the whole lease. */
const RETRY_AFTER_MAX_SECONDS = 1;

/** A route's effective settings, and whether it opted in with `@Idempotent()`. */
interface RouteSettings {
  http: ResolvedHttpOptions;
  optedIn: boolean;
  replayHeaders: string[];
  /** The route handler reports its start (see `HandlerStart`). */
  tracked: boolean;
}

/**
 * The global interceptor behind the `Idempotency-Key` header. Subclass it and override the protected
 * hooks (`scopeOf`, `fingerprintOf`) to change how scope and fingerprint are derived.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  protected readonly logger = new Logger('Idempotency');
  private readonly routes = new WeakMap<object, RouteSettings | null>();

  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly engine: IdempotencyService,
    private readonly metadata: IdempotencyMetadataAccessor,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() !== 'http' || !this.options.http.enabled) return next.handle();
    const route = this.settingsFor(context);
    if (!route) return next.handle();
    const request = context.switchToHttp().getRequest<IdempotencyRequest>();
    const response = context.switchToHttp().getResponse<ResponseLike>();
    if (!route.optedIn && !route.http.methods.has(request.method.toUpperCase())) return next.handle();

    const raw = request.headers[route.http.header];
    if (raw === undefined) {
      if (!route.http.required) return next.handle();
      throw this.problem(response, new IdempotencyProblemException('missing-key', `this endpoint requires the ${route.http.header} header`));
    }
    const parsed = parseIdempotencyKey(raw);
    if ('error' in parsed) throw this.problem(response, new IdempotencyProblemException('invalid-key', parsed.error));
    return defer(() => this.handle(parsed.key, request, response, route, next));
  }

  /** The key's scope; by default the configured `scope(request)`, else global. */
  protected scopeOf(request: IdempotencyRequest, settings: ResolvedHttpOptions): string {
    return `http:${settings.scope?.(request) ?? ''}`;
  }

  /**
   * The request fingerprint; by default method, path with query, the body's kind and media type, and the
   * body (canonical JSON, text, bytes, or multipart fields and file contents). Throw
   * {@link BodyNotFingerprintableError} for a body that cannot be fingerprinted yet.
   */
  protected fingerprintOf(request: IdempotencyRequest, settings: ResolvedHttpOptions): string | Promise<string> {
    return requestFingerprint(request, settings.ignoreBodyFields);
  }

  /**
   * Claims the key and answers: replay, mismatch, in progress, or run. `parsed` is set when called at the
   * handler's start for a body that a route interceptor (e.g. `FileInterceptor`) had yet to parse.
   */
  private async handle(key: string, request: IdempotencyRequest, response: ResponseLike, route: RouteSettings, next: CallHandler, parsed = false): Promise<unknown> {
    const settings = route.http;
    let fingerprint: string;
    try {
      fingerprint = await this.fingerprintOf(request, settings);
    } catch (err) {
      if (!(err instanceof BodyNotFingerprintableError)) throw err;
      // Not parsed yet: claim when the handler starts, after the route's own interceptors have read the body.
      if (!parsed && route.tracked && bodyIsUnread(request)) return this.handleWhenParsed(key, request, response, route, next);
      throw this.problem(response, new IdempotencyProblemException('body-not-fingerprintable', `${err.message}. ` +
        'Parse it before the handler (e.g. FileInterceptor, or attachFieldsToBody with @fastify/multipart), or send it without an idempotency key.'));
    }
    const claimRequest = {
      scope: this.scopeOf(request, settings),
      key,
      fingerprint,
      leaseMs: settings.leaseMs,
      ttlMs: settings.ttlMs,
    };
    let begun: BeginResult;
    try {
      begun = settings.waitMs > 0 ? await this.engine.beginOrWait(claimRequest, settings.waitMs) : await this.engine.begin(claimRequest);
    } catch (err) {
      if (err instanceof IdempotencyInputTooLongError) {
        throw this.problem(response, new IdempotencyProblemException(err.input === 'scope' ? 'scope-too-long' : 'invalid-key', err.message));
      }
      // Only an outage is answered 503 or run unprotected; any other error is not the client's to retry.
      if (!(err instanceof StoreUnavailableError)) throw err;
      if (settings.failOpen) {
        this.logger.warn(`${err.message}; failOpen is set, so key "${key}" runs unprotected (${UNPROTECTED_HEADER}: true)`);
        this.adapterHost.httpAdapter.setHeader(response, UNPROTECTED_HEADER, 'true');
        return lastValueFrom(next.handle(), { defaultValue: undefined });
      }
      this.logger.error(`${err.message}; refusing key "${key}" (fail closed)`);
      throw this.problem(response, new IdempotencyProblemException('store-unavailable', 'the idempotency store cannot be reached; retry later', { 'Retry-After': '1' }));
    }
    switch (begun.kind) {
      case 'replay':
        return this.replay(response, begun.record.result as StoredResponse);
      case 'mismatch':
        throw this.problem(response, new IdempotencyProblemException('key-reused', `idempotency key "${key}" was already used with a different request`));
      case 'in_progress':
        throw this.problem(response, new IdempotencyProblemException(
          'in-progress', `a request with idempotency key "${key}" is still being processed; retry later`,
          { 'Retry-After': String(Math.min(RETRY_AFTER_MAX_SECONDS, Math.max(1, Math.ceil(begun.retryAfterMs / 1000)))) },
        ));
      case 'acquired':
        if (parsed || !route.tracked) return this.run(begun.claim, response, route, next);
        return this.runReleasingBeforeStart(begun.claim, response, route, next);
    }
  }

  /**
   * Runs the claimed request; an error raised before the route handler started (a `ValidationPipe` 400, a
   * route interceptor's refusal) releases the key instead of being stored, so a corrected request can use it.
   */
  private async runReleasingBeforeStart(claim: Claim, response: ResponseLike, route: RouteSettings, next: CallHandler): Promise<unknown> {
    const start = new HandlerStart();
    try {
      return await this.run(claim, response, route, { handle: () => start.handle(next) });
    } catch (err) {
      throw err instanceof HandlerNeverStartedError ? err.cause : err;
    }
  }

  /** For a body parsed by a route interceptor: the key is claimed when the handler starts, and the handler's call runs inside the claim. */
  private handleWhenParsed(key: string, request: IdempotencyRequest, response: ResponseLike, route: RouteSettings, next: CallHandler): Promise<unknown> {
    const start = new HandlerStart((invoke) => this.handle(key, request, response, route, { handle: () => defer(() => asObservable(invoke())) }, true));
    return lastValueFrom(start.handle(next).pipe(catchError((err: unknown) => throwError(() => (err instanceof HandlerNeverStartedError ? err.cause : err)))), { defaultValue: undefined });
  }

  private async run(claim: Claim, response: ResponseLike, route: RouteSettings, next: CallHandler): Promise<unknown> {
    const stopLease = this.engine.keepAlive(claim);
    let value: unknown;
    try {
      value = await lastValueFrom(next.handle(), { defaultValue: undefined });
    } catch (err) {
      stopLease();
      await this.settleFailure(claim, err, response, route);
      throw err;
    }
    stopLease();
    let stored: StoredResponse | undefined;
    if (!isUnstorable(value, response) && isFinalStatus(response.statusCode, route.http)) {
      try {
        stored = { status: response.statusCode, headers: pickHeaders(response, route.replayHeaders), body: storeBody(value) };
      } catch {
        stored = undefined;
      }
    }
    if (!stored) {
      if (isFinalStatus(response.statusCode, route.http)) this.logger.warn(`response for key "${claim.key}" is a stream, a file or not serializable; sent as is, not stored, key released`);
      await this.safely(() => this.engine.release(claim), claim);
      return value;
    }
    try {
      await this.engine.complete(claim, stored);
    } catch (err) {
      // The handler's work is done: the client gets its response; retries see 409 until the lease ends.
      this.logger.error(`could not store the response for key "${claim.key}": ${err instanceof Error ? err.message : String(err)}`);
    }
    return value;
  }

  private async settleFailure(claim: Claim, err: unknown, response: ResponseLike, route: RouteSettings): Promise<void> {
    if (err instanceof HttpException) {
      const status = err.getStatus();
      if (isFinalStatus(status, route.http)) {
        const stored: StoredResponse = { status, headers: pickHeaders(response, route.replayHeaders), body: storeExceptionBody(err) };
        await this.safely(() => this.engine.complete(claim, stored), claim);
        return;
      }
    }
    const message = err instanceof Error ? err.message : String(err);
    await this.safely(() => this.engine.release(claim, { message }), claim);
  }

  private replay(response: ResponseLike, stored: StoredResponse): unknown {
    const adapter = this.adapterHost.httpAdapter;
    adapter.status(response, stored.status);
    for (const [name, value] of Object.entries(stored.headers)) adapter.setHeader(response, name, value as string);
    adapter.setHeader(response, REPLAYED_HEADER, 'true');
    switch (stored.body.t) {
      case 'e':
        return undefined;
      case 'n':
        return null;
      case 's':
        return stored.body.v;
      case 'j': {
        // Primitives go back through the adapter, which serializes them (and sets their content type) as the first time.
        const first = stored.body.v.charCodeAt(0);
        if (first !== 0x7b /* { */ && first !== 0x5b /* [ */) return JSON.parse(stored.body.v) as unknown;
        // Objects go out as the stored JSON text itself, so the replayed bytes are the original bytes.
        if (!Object.keys(stored.headers).some((name) => name.toLowerCase() === 'content-type')) adapter.setHeader(response, 'Content-Type', 'application/json; charset=utf-8');
        return stored.body.v;
      }
      case 'x':
        throw new HttpException(JSON.parse(stored.body.v) as object, stored.status);
    }
  }

  /**
   * Sets the problem's headers now, so they survive even when an app-wide exception filter renders the body,
   * and points its `type` at `http.problemTypeBase`.
   */
  private problem(response: ResponseLike, exception: IdempotencyProblemException): IdempotencyProblemException {
    exception.withTypeBase(this.options.http.problemTypeBase);
    const adapter = this.adapterHost.httpAdapter;
    adapter.setHeader(response, 'Content-Type', PROBLEM_CONTENT_TYPE);
    for (const [name, value] of Object.entries(exception.headers)) adapter.setHeader(response, name, value);
    return exception;
  }

  private async safely(action: () => Promise<unknown>, claim: Claim): Promise<void> {
    try {
      await action();
    } catch (err) {
      this.logger.error(`could not settle key "${claim.key}" (its lease will expire): ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  private settingsFor(context: ExecutionContext): RouteSettings | null {
    const handler = context.getHandler();
    let settings = this.routes.get(handler);
    if (settings !== undefined) return settings;
    const meta = this.metadata.forRoute(context.getClass(), handler as (...args: unknown[]) => unknown);
    if (meta.skip) {
      settings = null;
    } else {
      const http = meta.options ? resolveRouteOptions(this.options.http, meta.options, handler.name) : this.options.http;
      settings = {
        http, optedIn: meta.options !== undefined, replayHeaders: [...DEFAULT_REPLAY_HEADERS, ...http.replayHeaders], tracked: isTrackedHandler(handler),
      };
    }
    this.routes.set(handler, settings);
    return settings;
  }
}
