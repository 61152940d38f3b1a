import { IdempotencyError } from './idempotency.error';

/** The first call completed, but its result could not be stored (not JSON-serializable), so a duplicate cannot be given it. */
export class ResultNotStoredError extends IdempotencyError {
  readonly code = 'RESULT_NOT_STORED';

  constructor(readonly key: string) {
    super(`the call with idempotency key "${key}" completed but its result was not JSON-serializable, so it was not stored; return plain JSON values from idempotent methods`);
    this.name = 'ResultNotStoredError';
  }
}
