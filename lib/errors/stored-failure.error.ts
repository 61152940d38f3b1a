import { IdempotencyError } from './idempotency.error';

/** The first call with this key failed and `onFailure: "lock"` made that failure final: it is rethrown to every duplicate. */
export class StoredFailureError extends IdempotencyError {
  readonly code = 'STORED_FAILURE';

  constructor(
    readonly key: string,
    readonly originalName: string,
    message: string,
  ) {
    super(message);
    this.name = 'StoredFailureError';
  }
}
