/**
 * Base class of every error this library throws to application code, so one exception filter can map them all
 * (`catch (err) { if (err instanceof IdempotencyError) … err.code … }`). The HTTP problems the interceptor
 * answers with (`IdempotencyProblemException`) extend Nest's `HttpException` instead and carry a `code` too.
 */
export abstract class IdempotencyError extends Error {
  /** A stable, machine-readable code (e.g. `STORE_UNAVAILABLE`): branch on it, not on the message. */
  abstract readonly code: string;
}
