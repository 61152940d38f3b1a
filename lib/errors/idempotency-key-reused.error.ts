/** The key was already used for a call with other arguments (another fingerprint). */
export class IdempotencyKeyReusedError extends Error {
  constructor(readonly key: string) {
    super(`idempotency key "${key}" was already used with different arguments; use a new key for a different call`);
    this.name = 'IdempotencyKeyReusedError';
  }
}
