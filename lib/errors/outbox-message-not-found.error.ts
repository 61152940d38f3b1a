import { IdempotencyError } from './idempotency.error';

/** `OutboxService.retry(id)` / `skip(id)` named a message the outbox does not hold (never published, or removed by retention). */
export class OutboxMessageNotFoundError extends IdempotencyError {
  readonly code = 'OUTBOX_MESSAGE_NOT_FOUND';

  constructor(readonly messageId: string) {
    super(`no outbox message with id "${messageId}"; list dead ones with OutboxService.messages({ status: "dead" })`);
    this.name = 'OutboxMessageNotFoundError';
  }
}
