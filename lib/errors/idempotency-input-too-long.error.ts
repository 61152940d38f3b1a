import { IdempotencyError } from './idempotency.error';
/**
 * A key or scope is longer than the store can index. Refused before the store is asked, so it is never
 * mistaken for an outage: the caller must shorten it (hash a long value, or choose a shorter scope).
 * The HTTP interceptor answers it with `400` problem+json.
 */
export class IdempotencyInputTooLongError extends IdempotencyError {
  readonly code = 'IDEMPOTENCY_INPUT_TOO_LONG';

  constructor(readonly input: 'key' | 'scope', readonly bytes: number, readonly limit: number) {
    super(`the idempotency ${input} is ${bytes} bytes long (UTF-8); the limit is ${limit} bytes. Use a shorter ${input}, or a hash of a long value`);
    this.name = 'IdempotencyInputTooLongError';
  }
}
