import { IdempotencyError } from './idempotency.error';

/** The idempotency store could not be reached, so the work was not started (fail closed). */
export class StoreUnavailableError extends IdempotencyError {
  readonly code = 'STORE_UNAVAILABLE';

  constructor(cause: unknown) {
    super(`idempotency store unavailable: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'StoreUnavailableError';
  }
}
