/** The idempotency store could not be reached, so the work was not started (fail closed). */
export class StoreUnavailableError extends Error {
  constructor(cause: unknown) {
    super(`idempotency store unavailable: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'StoreUnavailableError';
  }
}
