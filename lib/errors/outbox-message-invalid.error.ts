import { IdempotencyError } from './idempotency.error';

/** A message given to `OutboxService.publish()` is malformed (missing topic, bad id, key or headers). */
export class OutboxMessageInvalidError extends IdempotencyError {
  readonly code = 'OUTBOX_MESSAGE_INVALID';

  constructor(detail: string) {
    super(`OutboxService.publish(): ${detail}`);
    this.name = 'OutboxMessageInvalidError';
  }
}
