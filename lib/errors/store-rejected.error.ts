import { IdempotencyError } from './idempotency.error';
/**
 * The idempotency store was reachable but refused the claim (a data or schema error, not an outage):
 * retrying will not help, so it is not a `StoreUnavailableError` and `failOpen` does not apply.
 * The HTTP interceptor lets it through as a 500.
 */
export class StoreRejectedError extends IdempotencyError {
  readonly code = 'STORE_REJECTED';

  constructor(cause: unknown) {
    super(`the idempotency store refused the claim: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'StoreRejectedError';
  }
}
