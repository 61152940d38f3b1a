import { IdempotencyError } from './idempotency.error';

/** The key was already used for a call with other arguments (another fingerprint). */
export class IdempotencyKeyReusedError extends IdempotencyError {
  readonly code = 'KEY_REUSED';

  constructor(readonly key: string) {
    super(`idempotency key "${key}" was already used with different arguments; use a new key for a different call`);
    this.name = 'IdempotencyKeyReusedError';
  }
}
