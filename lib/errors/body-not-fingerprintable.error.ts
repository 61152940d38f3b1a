import { IdempotencyError } from './idempotency.error';
/**
 * A keyed request's body could not be made part of its fingerprint (an upload nothing parsed before the
 * handler, a file without its content): the interceptor refuses it with `415` problem+json rather than risk
 * replaying a response for a different payload.
 */
export class BodyNotFingerprintableError extends IdempotencyError {
  readonly code = 'BODY_NOT_FINGERPRINTABLE';

  constructor(readonly mediaType: string, reason: string) {
    super(reason);
    this.name = 'BodyNotFingerprintableError';
  }
}
