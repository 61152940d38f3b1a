import { CallHandler, ExecutionContext, HttpException, Inject, Injectable, Logger, NestInterceptor } from '@nestjs/common';
import { LibraryLogger } from '../observability/library-logger';
import { HttpAdapterHost } from '@nestjs/core';
import { defer, lastValueFrom, Observable, of } from 'rxjs';
import { Claim } from '../core/idempotency-record';
import { BeginResult, IdempotencyService } from '../core/idempotency.service';
import { BodyNotFingerprintableError } from '../errors/body-not-fingerprintable.error';
import { IdempotencyInputTooLongError } from '../errors/idempotency-input-too-long.error';
import { StoreUnavailableError } from '../errors/store-unavailable.error';
import { TransactionalCall } from '../transaction/transactional-call';
import { isConflictOfOurs } from '../transaction/transaction-conflicts';
import { REPLAYED_HEADER, RESOLVED_IDEMPOTENCY_OPTIONS, UNPROTECTED_HEADER } from '../idempotency.constants';
import type { IdempotencyRequest } from '../interfaces/idempotency-options.interface';
import type { ResolvedHttpOptions, ResolvedOptions } from '../interfaces/resolved-options';
import { resolveRouteOptions } from '../utils/validate-options';
import { LeaseLostError } from '../errors/lease-lost.error';
import { TransactionAbortedError } from '../errors/transaction-aborted.error';
import { IdempotencyMetadataAccessor } from '../idempotency-metadata.accessor';
import { parseIdempotencyKey } from './idempotency-key';
import { IdempotencyProblemException, PROBLEM_CONTENT_TYPE } from './problem-details';
import { asObservable, HandlerNeverStartedError, HandlerStart, isTrackedHandler } from './handler-start';
import { rawResponse } from './raw-response';
import { bodyIsUnread, mediaTypeOf, requestFingerprint } from './request-fingerprint';
import { ResponseCapture } from './response-capture';
import { replayOnto } from './response-replay';
import {
  DEFAULT_REPLAY_HEADERS, isStreamingValue, ResponseLike, ResponseReplacement, StoredResponse, toReplacement, toStoredResponse, WireResponse,
} from './stored-response';

/** 2xx and 4xx outcomes are final, except those that ask for a retry; 5xx release the key unless configured otherwise. */
function isFinalStatus(status: number, settings: ResolvedHttpOptions): boolean {
  if (settings.retryableStatuses.has(status)) return false;
  return status < 500 || settings.storeServerErrors;
}

/**
 * The requests this interceptor handles, so that a second instance of it on the same route lets them through. A
 * WeakSet rather than a property on the request: adding one changes the request object's shape, which slows every
 * later property access on it, in Node and in the adapter.
 */
const applied = new WeakSet<object>();

function appliedTo(request: IdempotencyRequest): boolean {
  return applied.has(request);
}

/** What the interceptor's Observable emits on a replay: nothing the adapter would send (the stored bytes are). */
const REPLAYED = of(undefined);

/** Whether the interceptor acts on this method (`methods` holds upper-case names; Node gives them so). */
function actsOn(methods: ReadonlySet<string>, method: string): boolean {
  return methods.has(method) || methods.has(method.toUpperCase());
}

/** The handler's value as the Observable Nest sends; `undefined` (a replay) as one shared Observable. */
function asValue(value: unknown): Observable<unknown> {
  return value === undefined ? REPLAYED : of(value);
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Duplicates usually finish in well under a second: hint a short retry rather than the whole lease. */
const RETRY_AFTER_MAX_SECONDS = 1;

/** A route's effective settings, and whether it opted in with `@Idempotent()`. */
interface RouteSettings {
  http: ResolvedHttpOptions;
  optedIn: boolean;
  replayHeaders: string[];
  /** The handler sends its own response (`@Res()` without passthrough). */
  respondsItself: boolean;
  /** The route handler reports its start (see `HandlerStart`). */
  tracked: boolean;
}

/**
 * The global interceptor behind the `Idempotency-Key` header. Subclass it and override the protected
 * hooks (`scopeOf`, `fingerprintOf`) to change how scope and fingerprint are derived.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  protected readonly logger: Logger = new LibraryLogger('Idempotency');
  private readonly routes = new WeakMap<object, RouteSettings | null>();

  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly engine: IdempotencyService,
    private readonly metadata: IdempotencyMetadataAccessor,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> | Promise<Observable<unknown>> {
    // Runs on every request of every route: what lets a request through is checked first, without allocating.
    if (context.getType() !== 'http' || !this.options.http.enabled) return next.handle();
    const route = this.settingsFor(context);
    if (!route) return next.handle();
    // getArgByIndex, not switchToHttp(): that one assigns three new closures to the context on each call.
    const request = context.getArgByIndex<IdempotencyRequest>(0);
    if (!route.optedIn && !actsOn(route.http.methods, request.method)) return next.handle();
    const raw = request.headers[route.http.header];
    if (raw === undefined) {
      if (!route.http.required) return next.handle();
      if (appliedTo(request)) return next.handle();
      throw this.problem(context.getArgByIndex<ResponseLike>(1), new IdempotencyProblemException('missing-key', `this endpoint requires the ${route.http.header} header`));
    }
    if (appliedTo(request)) return next.handle(); // applied twice (app-wide and on the route): the outer one decides
    const response = context.getArgByIndex<ResponseLike>(1);
    const parsed = parseIdempotencyKey(raw);
    if ('error' in parsed) throw this.problem(response, new IdempotencyProblemException('invalid-key', parsed.error));
    applied.add(request);
    // A promise of the Observable, not defer(): Nest adopts either, and this saves an Observable per request.
    return this.handle(parsed.key, request, response, route, next).then(asValue);
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
      const computed = this.fingerprintOf(request, settings);
      fingerprint = typeof computed === 'string' ? computed : await computed; // usually synchronous: no await then
    } catch (err) {
      if (!(err instanceof BodyNotFingerprintableError)) throw err;
      // Not parsed yet: claim when the handler starts, after the route's own interceptors have read the body.
      if (!parsed && route.tracked && bodyIsUnread(request)) return this.handleWhenParsed(key, request, response, route, next);
      throw this.problem(response, new IdempotencyProblemException('body-not-fingerprintable', `${err.message}. ${unparsedBodyHint(mediaTypeOf(request))}`));
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
      if (settings.transaction) {
        const options = { isolation: settings.transaction.isolation, waitMs: settings.waitMs };
        begun = await this.engine.beginInTransaction(claimRequest, options, '@Idempotent() / http.transaction');
      } else {
        begun = settings.waitMs > 0 ? await this.engine.beginOrWait(claimRequest, settings.waitMs) : await this.engine.begin(claimRequest);
      }
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
        return this.replay(response, begun.record.result as StoredResponse, route);
      case 'mismatch':
        throw this.problem(response, new IdempotencyProblemException('key-reused', `idempotency key "${key}" was already used with a different request`));
      case 'in_progress':
        throw this.problem(response, new IdempotencyProblemException(
          'in-progress', `a request with idempotency key "${key}" is still being processed; retry later`,
          { 'Retry-After': String(Math.min(RETRY_AFTER_MAX_SECONDS, Math.max(1, Math.ceil(begun.retryAfterMs / 1000)))) },
        ));
      case 'acquired':
        if (parsed || !route.tracked) return this.run(begun.claim, response, route, () => lastValueFrom(next.handle(), { defaultValue: undefined }), begun.call);
        return this.runReleasingBeforeStart(begun.claim, response, route, next, begun.call);
    }
  }

  /**
   * Runs the claimed request; an error raised before the route handler started (a `ValidationPipe` 400, a
   * route interceptor's refusal) releases the key instead of being stored, so a corrected request can use it.
   */
  private async runReleasingBeforeStart(claim: Claim, response: ResponseLike, route: RouteSettings, next: CallHandler, tx?: TransactionalCall): Promise<unknown> {
    const start = new HandlerStart();
    try {
      return await this.run(claim, response, route, () => start.call(next), tx);
    } catch (err) {
      throw err instanceof HandlerNeverStartedError ? err.cause : err;
    }
  }

  /** For a body parsed by a route interceptor: the key is claimed when the handler starts, and the handler's call runs inside the claim. */
  private async handleWhenParsed(key: string, request: IdempotencyRequest, response: ResponseLike, route: RouteSettings, next: CallHandler): Promise<unknown> {
    const start = new HandlerStart((invoke) => this.handle(key, request, response, route, { handle: () => defer(() => asObservable(invoke())) }, true));
    try {
      return await start.call(next);
    } catch (err) {
      throw err instanceof HandlerNeverStartedError ? err.cause : err;
    }
  }

  /**
   * Runs the handler (`invoke`: the rest of Nest's pipeline to its last value) under the claim. What is stored is what the client receives: the response is captured at
   * the wire (below every serializer, interceptor and exception filter), held until it is recorded, and only
   * then sent. A response that cannot be recorded in time is answered with 503 instead (see `settle`). In the
   * transactional mode `tx` is the transaction the claim was made in: the handler runs inside it.
   */
  private async run(claim: Claim, response: ResponseLike, route: RouteSettings, invoke: () => Promise<unknown>, tx?: TransactionalCall): Promise<unknown> {
    // In a transaction the open transaction is the lease, and "stopping" it means rolling back whatever was not committed.
    const stopLease = tx ? () => void tx.abandon() : this.engine.keepAlive(claim);
    let failure: unknown;
    let value: unknown;
    const capture = new ResponseCapture(rawResponse(response), {
      settle: (sent) => this.settle(claim, sent, route, failure, tx).finally(stopLease),
      streamed: () => this.releaseUnstored(claim, stopLease, tx),
      unsent: () => this.sendUnsent(response, value, failure, claim, stopLease, tx),
    });
    try {
      value = await (tx ? tx.inside(invoke) : invoke());
    } catch (err) {
      failure = err;
      capture.handlerDone(route.http.leaseMs);
      // Postgres aborted the request's transaction under the handler's own statement: rolled back whole (the key is
      // free at once, nothing is stored) and answered as a conflict at the COMMIT is, not as the handler's 500.
      if (tx && (await tx.abandonIfAbortedForConflict(err))) {
        this.logger.warn(`the transaction of key "${claim.key}" was aborted for a conflict under the handler's statement, its writes were rolled back: ${messageOf(err)}`);
        failure = this.problem(response, transactionConflict());
        throw failure;
      }
      throw err;
    }
    capture.handlerDone(route.http.leaseMs);
    if (isStreamingValue(value)) {
      capture.stream();
      await this.releaseUnstored(claim, stopLease, tx);
    }
    return value;
  }

  /**
   * Records a response sent in one piece: a final status is stored (the write retried through a store outage
   * for up to one lease), anything else releases the key. Resolves to a 503 problem to send instead when the
   * outcome could not be stored: the client must not see a success that a retry would not get again.
   */
  private async settle(claim: Claim, sent: WireResponse, route: RouteSettings, failure: unknown, tx?: TransactionalCall): Promise<ResponseReplacement | undefined> {
    if (tx) return this.settleTransaction(tx, sent, route, failure);
    // Refused before the handler started (a pipe or guard): nothing ran, so the key is released, never stored.
    if (failure instanceof HandlerNeverStartedError || !isFinalStatus(sent.status, route.http)) {
      const error = failure === undefined ? undefined : { message: messageOf(failure) };
      await this.safely(() => this.engine.release(claim, error), claim);
      return undefined;
    }
    try {
      // false: the lease was taken over and the newer record stands; this client still gets its response.
      // The response is sent once Postgres holds it (committed: a retry from now on replays it, whatever happens to
      // this process or to Redis), not once Redis does too: the Redis write (record in, in-flight marker out) is
      // queued on the client before the response goes out, so a retry through this instance reaches Redis after it
      // (one connection, commands in order), and one through another instance would have to overtake a command
      // already on its way. Should it ever, or should Redis fail, the retry finds the marker and is told 409
      // (in progress, retry after 1 s) — as during the Redis round trip this saves on every first-time key — never
      // a wrong answer: the marker only ever stands for a key whose outcome Postgres decides.
      await this.engine.completeWithin(claim, toStoredResponse(sent, route.replayHeaders), route.http.leaseMs, true);
      return undefined;
    } catch (err) {
      this.logger.error(`could not store the response for key "${claim.key}", answering 503 instead: ${messageOf(err)}`);
      const problem = new IdempotencyProblemException(
        'store-unavailable', 'the outcome of this request could not be recorded; retry with the same key later', { 'Retry-After': '1' },
        this.options.http.problemTypeBase,
      );
      return problemReplacement(problem, this.options.http.problemTypeBase);
    }
  }

  /**
   * The transactional mode, all in the claim's transaction, with one commit: a success (2xx, 3xx) is stored with the
   * handler's writes. A final 4xx rolls the writes back to the savepoint after the claim, then is stored (replayed,
   * its writes gone); anything else rolls them back and releases the key. A commit that fails is answered with a
   * problem instead: the client never sees an outcome whose writes were undone.
   */
  private async settleTransaction(tx: TransactionalCall, sent: WireResponse, route: RouteSettings, failure: unknown): Promise<ResponseReplacement | undefined> {
    // Only `run` ends the transaction before this: it was aborted for a conflict, and the client gets 409 transaction-conflict.
    if (tx.finished) return undefined;
    if (failure instanceof HandlerNeverStartedError || !isFinalStatus(sent.status, route.http)) {
      const released = await tx.releaseWith(failure === undefined ? undefined : { message: messageOf(failure) });
      // The handler failed and Postgres could not even roll its transaction back cleanly: its connection failed (a
      // restart, a cut), most likely under the handler's own query too. That is a store outage, answered as one.
      if (released || failure === undefined || failure instanceof HandlerNeverStartedError) return undefined;
      return problemReplacement(new IdempotencyProblemException(
        'store-unavailable', 'the database failed while this request ran; its writes were rolled back. Retry with the same key later', { 'Retry-After': '1' },
      ), this.options.http.problemTypeBase);
    }
    try {
      const stored = toStoredResponse(sent, route.replayHeaders);
      await (failure !== undefined || sent.status >= 400 ? tx.storeFailure(stored) : tx.commitWith(stored));
      return undefined;
    } catch (err) {
      const why = `the transaction of key "${tx.claim.key}" did not commit, its writes were rolled back: ${messageOf(err)}`;
      if (isConflictOfOurs(err)) {
        // Expected now and then at 'repeatable read' and 'serializable': not an outage, and the key is free again.
        this.logger.warn(why);
        return problemReplacement(transactionConflict(), this.options.http.problemTypeBase);
      }
      this.logger.error(why);
      if (err instanceof TransactionAbortedError) return problemReplacement(transactionAborted(), this.options.http.problemTypeBase);
      const problem = err instanceof LeaseLostError
        ? new IdempotencyProblemException('in-progress', 'another request took this key over before this one committed; its writes were rolled back. Retry with the same key to get that request\'s response', { 'Retry-After': '1' })
        : new IdempotencyProblemException('store-unavailable', 'the outcome of this request could not be committed; its writes were rolled back. Retry with the same key later', { 'Retry-After': '1' });
      return problemReplacement(problem, this.options.http.problemTypeBase);
    }
  }

  /** A streamed response is sent as it is and not stored: the key is released (and a transaction's writes rolled back). */
  private async releaseUnstored(claim: Claim, stopLease: () => void, tx?: TransactionalCall): Promise<void> {
    this.logger.warn(`response for key "${claim.key}" is a stream, a file or an async iterable; sent as is, not stored, key released`);
    if (tx) {
      await tx.releaseWith();
      return;
    }
    stopLease();
    await this.safely(() => this.engine.release(claim), claim);
  }

  /**
   * The client left and Nest skipped sending (it does for a handler's Observable): the outcome is recorded from
   * the handler's own value or HttpException, as the adapter would send it, so a retry does not run it again.
   */
  private sendUnsent(response: ResponseLike, value: unknown, failure: unknown, claim: Claim, stopLease: () => void, tx?: TransactionalCall): void {
    const adapter = this.adapterHost.httpAdapter;
    try {
      if (failure === undefined) {
        adapter.reply(response, value, response.statusCode);
        return;
      }
      if (failure instanceof HttpException) {
        const body = failure.getResponse();
        adapter.reply(response, typeof body === 'object' ? body : { statusCode: failure.getStatus(), message: body }, failure.getStatus());
        return;
      }
    } catch (err) {
      failure = err; // the adapter could not render it: nothing to store
    }
    if (tx) {
      void tx.releaseWith({ message: messageOf(failure) });
      return;
    }
    stopLease();
    void this.safely(() => this.engine.release(claim, { message: messageOf(failure) }), claim);
  }

  /**
   * Sends the stored response: the pipeline outside this interceptor runs as usual, and at the wire its status,
   * body and body headers are replaced by the stored bytes, so they are exactly what the first client received.
   */
  private replay(response: ResponseLike, stored: StoredResponse, route: RouteSettings): unknown {
    const replacement = toReplacement(stored);
    replacement.headers[REPLAYED_HEADER] = 'true';
    const raw = rawResponse(response);
    replayOnto(raw, replacement);
    // A handler that sends its own response (`@Res()` without passthrough) is not called, so nothing else ends it.
    if (route.respondsItself) raw.end();
    return undefined;
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
      this.logger.error(`could not settle key "${claim.key}" (its lease will expire): ${messageOf(err)}`);
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
        http,
        optedIn: meta.options !== undefined,
        replayHeaders: [...DEFAULT_REPLAY_HEADERS, ...http.replayHeaders],
        respondsItself: this.metadata.respondsItself(context.getClass(), handler as (...args: unknown[]) => unknown),
        tracked: isTrackedHandler(handler),
      };
    }
    this.routes.set(handler, settings);
    return settings;
  }
}

/** Postgres aborted the request's transaction for a conflict (under the handler's statement or at the COMMIT). */
function transactionConflict(): IdempotencyProblemException {
  return new IdempotencyProblemException(
    'transaction-conflict', 'Postgres aborted this request\'s transaction for a conflict with a concurrent one; nothing of it was committed. Retry with the same key', { 'Retry-After': '1' },
  );
}

/**
 * The handler caught a failed statement's error and answered: Postgres had aborted its transaction, so nothing of it
 * committed. The handler's defect, logged with what to change; a retry fails the same way until it is changed.
 */
function transactionAborted(): IdempotencyProblemException {
  return new IdempotencyProblemException(
    'transaction-aborted', 'a statement of this request\'s handler failed and the handler went on; Postgres aborted its transaction, so nothing of it was committed (the key is free)',
  );
}

/** A problem as the bytes sent in place of a held response. */
function problemReplacement(problem: IdempotencyProblemException, typeBase: string): ResponseReplacement {
  problem.withTypeBase(typeBase);
  const headers: Record<string, string> = { ...problem.headers, 'Content-Type': PROBLEM_CONTENT_TYPE };
  return { status: problem.getStatus(), headers, body: Buffer.from(JSON.stringify(problem.getResponse())) };
}

/** What to do about a body no parser read, by its media type. */
function unparsedBodyHint(media: string): string {
  if (media.startsWith('multipart/')) {
    return 'Parse it before the handler (e.g. FileInterceptor, or attachFieldsToBody with @fastify/multipart), or send it without an idempotency key.';
  }
  return `Register a body parser for ${media || 'its content type'} (Nest's app.useBodyParser(): 'text' or 'raw' on Express, ` +
    'the media type on Fastify), or send it without an idempotency key.';
}
