import { IdempotencyError } from './idempotency.error';

/** No idempotency key could be derived for a guarded method call. */
export class KeyDerivationError extends IdempotencyError {
  readonly code = 'KEY_DERIVATION_FAILED';

  constructor(readonly method: string, reason: string) {
    super(`cannot derive an idempotency key for ${method}: ${reason}; pass { key: (...args) => string } to @IdempotentMethod()`);
    this.name = 'KeyDerivationError';
  }
}
