import { IdempotencyError } from './idempotency.error';

/**
 * A delivery attempt of an outbox message did not finish within its delivery timeout: the attempt counts as failed
 * and is retried with backoff, so a hung target never holds its key forever. A handler's `delivery.signal` is
 * aborted with this error at that moment.
 */
export class OutboxDeliveryTimeoutError extends IdempotencyError {
  readonly code = 'OUTBOX_DELIVERY_TIMEOUT';

  constructor(readonly messageId: string, readonly topic: string, readonly timeoutMs: number) {
    super(
      `delivery of outbox message "${messageId}" (topic "${topic}") did not finish within ${timeoutMs} ms; it is retried with backoff. ` +
        'Let the target give up sooner (pass delivery.signal to your client) or raise outbox.deliveryTimeout',
    );
    this.name = 'OutboxDeliveryTimeoutError';
  }
}
