import { Logger } from '@nestjs/common';
import { LongTimer, setLongTimeout } from '../../utils/long-timer';

/** Breaker settings; see `redis.breaker` in the module options. */
export interface CircuitBreakerOptions {
  /** Consecutive failures that open the breaker. */
  failureThreshold: number;
  /** How long the breaker stays open before one call is let through to probe. */
  resetAfterMs: number;
  /** A call slower than this counts as a failure. */
  timeoutMs: number;
}

class CallTimeoutError extends Error {
  constructor(ms: number) {
    super(`call did not finish within ${ms} ms`);
  }
}

/** A call in flight: `expire` is cleared once it settled, or it times out at `deadline`. */
interface PendingCall {
  deadline: number;
  expire: (() => void) | undefined;
}

/**
 * Protects requests from a dead or slow dependency: after `failureThreshold` consecutive failures
 * every call is skipped for `resetAfterMs`, then a single probe decides whether to close again.
 * Calls are timed without a timer each: every call has the same timeout, so they expire in the order they
 * started, and one timer at a time, armed for the oldest call in flight, times them all out.
 */
export class CircuitBreaker {
  private failures = 0;
  private openUntil = 0;
  private probing = false;
  /** Calls in the order they started (so by deadline); settled ones are dropped when the timer runs. */
  private pending: PendingCall[] = [];
  private sweepTimer: LongTimer | undefined;

  constructor(
    private readonly name: string,
    private readonly options: CircuitBreakerOptions,
    private readonly logger: Logger,
  ) {}

  /** True while calls are being skipped. */
  get isOpen(): boolean {
    return this.openUntil > 0 && (Date.now() < this.openUntil || this.probing);
  }

  /** Runs `call`, or returns `fallback` without calling when the breaker is open or the call fails. */
  run<T>(call: () => Promise<T>, fallback: T): Promise<T> {
    if (this.openUntil > 0) {
      if (Date.now() < this.openUntil || this.probing) return Promise.resolve(fallback);
      this.probing = true;
    }
    return new Promise<T>((resolve) => {
      const entry: PendingCall = { deadline: Date.now() + this.options.timeoutMs, expire: undefined };
      entry.expire = () => {
        this.onFailure(new CallTimeoutError(this.options.timeoutMs));
        resolve(fallback);
      };
      this.watch(entry);
      let started: Promise<T>;
      try {
        started = call();
      } catch (err) {
        entry.expire = undefined;
        this.onFailure(err);
        resolve(fallback);
        return;
      }
      started.then(
        (value) => {
          if (entry.expire === undefined) return; // timed out already: counted as a failure
          entry.expire = undefined;
          this.onSuccess();
          resolve(value);
        },
        (err: unknown) => {
          if (entry.expire === undefined) return;
          entry.expire = undefined;
          this.onFailure(err);
          resolve(fallback);
        },
      );
    });
  }

  private watch(entry: PendingCall): void {
    this.pending.push(entry);
    if (!this.sweepTimer) this.sweepTimer = setLongTimeout(this.sweep, this.options.timeoutMs);
  }

  /** Times out the calls past their deadline, drops the settled ones, and re-arms for the oldest left. */
  private readonly sweep = (): void => {
    this.sweepTimer = undefined;
    const now = Date.now();
    let i = 0;
    for (; i < this.pending.length; i++) {
      const entry = this.pending[i];
      if (entry.expire === undefined) continue;
      if (entry.deadline > now) break;
      const expire = entry.expire;
      entry.expire = undefined;
      expire();
    }
    this.pending = i === this.pending.length ? [] : this.pending.slice(i);
    if (this.pending.length > 0) this.sweepTimer = setLongTimeout(this.sweep, Math.max(this.pending[0].deadline - now, 1));
  };

  private onSuccess(): void {
    if (this.openUntil > 0) this.logger.log(`${this.name} is reachable again; using it again`);
    this.failures = 0;
    this.openUntil = 0;
    this.probing = false;
  }

  private onFailure(err: unknown): void {
    this.failures++;
    const wasOpen = this.openUntil > 0;
    this.probing = false;
    if (wasOpen || this.failures >= this.options.failureThreshold) {
      this.openUntil = Date.now() + this.options.resetAfterMs;
      if (!wasOpen) {
        const reason = err instanceof Error ? err.message : String(err);
        this.logger.warn(
          `${this.name} failed ${this.failures} times in a row (${reason}); serving from Postgres alone for ${this.options.resetAfterMs} ms before trying again`,
        );
      }
    }
  }
}
