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

/**
 * Protects requests from a dead or slow dependency: after `failureThreshold` consecutive failures
 * every call is skipped for `resetAfterMs`, then a single probe decides whether to close again.
 */
export class CircuitBreaker {
  private failures = 0;
  private openUntil = 0;
  private probing = false;

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
  async run<T>(call: () => Promise<T>, fallback: T): Promise<T> {
    if (this.openUntil > 0) {
      if (Date.now() < this.openUntil || this.probing) return fallback;
      this.probing = true;
    }
    let timer: LongTimer | undefined;
    try {
      const result = await Promise.race([
        call(),
        new Promise<never>((_, reject) => {
          timer = setLongTimeout(() => reject(new CallTimeoutError(this.options.timeoutMs)), this.options.timeoutMs);
        }),
      ]);
      this.onSuccess();
      return result;
    } catch (err) {
      this.onFailure(err);
      return fallback;
    } finally {
      timer?.clear();
    }
  }

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
