import { IdempotencyError } from './idempotency.error';

/**
 * A transactional call lost its claim before it could commit (its lease expired and another caller took the
 * key over): its writes were rolled back, so nothing it did survives. Retry with the same key to get the
 * other caller's outcome.
 */
export class LeaseLostError extends IdempotencyError {
  readonly code = 'LEASE_LOST';

  constructor(readonly key: string) {
    super(
      `the claim on idempotency key "${key}" was taken over before its transaction committed; its writes were rolled back. ` +
        'Retry with the same key to get the outcome of the call that holds it now (a longer lockTimeout avoids this)',
    );
    this.name = 'LeaseLostError';
  }
}
