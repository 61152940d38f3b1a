import type { CallHandler } from '@nestjs/common';
import { AsyncLocalStorage } from 'node:async_hooks';
import { from, isObservable, lastValueFrom, Observable } from 'rxjs';
import { copyMethodMetadata } from '../utils/copy-method-metadata';

const current = new AsyncLocalStorage<HandlerStart>();
/**
 * How many `HandlerStart`s are waiting for their handler. While none is, `current` is disabled: on Node 20 an
 * enabled AsyncLocalStorage makes Node run a promise hook for every promise of the process (about 5% of a replay's
 * CPU, which never needs it), and `disable()` is what turns that hook off again. Re-enabled by the next `run()`.
 */
let waiting = 0;

function stopWaiting(): void {
  if (--waiting === 0) current.disable();
}

/** How many requests are waiting for their route handler to start (for tests). */
export function handlerStartsWaiting(): number {
  return waiting;
}

const TRACKED = Symbol('nestjs-idempotency:tracked-handler');

type Method = ((...args: unknown[]) => unknown) & { [TRACKED]?: true };

/**
 * Tells whether a route handler started. Nest runs the pipes (`ValidationPipe`, …) and then the handler
 * inside the interceptor's `next.handle()`, so an error from there may come before the handler ever ran;
 * the route handler, wrapped once at startup by {@link trackRouteHandler}, reports its start to the
 * `HandlerStart` of its request. With `takeOver`, the call itself is handed over: the interceptor then
 * claims the key at that moment (when a route interceptor such as `FileInterceptor` has parsed the body).
 */
export class HandlerStart {
  started = false;

  constructor(readonly takeOver?: (invoke: () => unknown) => Promise<unknown>) {}

  /**
   * `next.handle()` to its last value, with the route handler reporting to this start; an error before the start
   * comes out as {@link HandlerNeverStartedError}. A promise rather than an Observable pipeline (`defer`,
   * `catchError`, `finalize`): the interceptor awaits it anyway, and this runs on every first-time key.
   */
  async call(next: CallHandler): Promise<unknown> {
    waiting++;
    try {
      // Nest binds the handler's call to the async context `handle()` is called in: this start's.
      return await current.run(this, () => lastValueFrom(next.handle(), { defaultValue: undefined }));
    } catch (err) {
      throw this.started ? err : new HandlerNeverStartedError(err);
    } finally {
      // The store is read only until the handler starts, which is before the call ends.
      stopWaiting();
    }
  }
}

/** The request was refused before its route handler started (a pipe, or a route interceptor, threw). */
export class HandlerNeverStartedError extends Error {
  constructor(override readonly cause: unknown) {
    super(`the route handler never started: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.name = 'HandlerNeverStartedError';
  }
}

/** Whether `handler` (from `ExecutionContext.getHandler()`) reports its start. */
export function isTrackedHandler(handler: unknown): boolean {
  return typeof handler === 'function' && (handler as Method)[TRACKED] === true;
}

/**
 * Replaces `prototype[name]` by a wrapper that reports its start, keeping the original's name and
 * metadata. Must run before Nest registers the routes: the router keeps the function it finds then.
 * Wrapping twice is a no-op.
 */
export function trackRouteHandler(prototype: object, name: string): void {
  const target = prototype as Record<string, Method | undefined>;
  const original = target[name];
  if (typeof original !== 'function' || original[TRACKED]) return;
  const wrapper = function (this: unknown, ...args: unknown[]): unknown {
    const start = current.getStore();
    if (!start || start.started) return original.apply(this, args);
    start.started = true;
    return start.takeOver ? start.takeOver(() => original.apply(this, args)) : original.apply(this, args);
  } as Method;
  copyMethodMetadata(original, wrapper);
  Object.defineProperty(wrapper, 'name', { value: original.name });
  wrapper[TRACKED] = true;
  const descriptor = Object.getOwnPropertyDescriptor(prototype, name) ?? { writable: true, configurable: true, enumerable: false };
  Object.defineProperty(prototype, name, { ...descriptor, value: wrapper });
}

/** A handler's return value as Nest treats it: an Observable as is, anything else (a promise or a value) as one value. */
export function asObservable(result: unknown): Observable<unknown> {
  return isObservable(result) ? result : from(Promise.resolve(result));
}
