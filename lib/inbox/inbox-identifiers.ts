import { IdempotencyConfigError } from '../errors/idempotency-config.error';

/** Refuses an empty consumer name or message id, as both inbox implementations must (the Postgres one and the in-memory one). */
export function checkInboxIdentifiers(ids: readonly string[], consumer: string): void {
  if (typeof consumer !== 'string' || consumer.length === 0) {
    throw new IdempotencyConfigError(['inbox consumer: expected a non-empty name, e.g. "payment-webhooks"']);
  }
  for (const id of ids) {
    if (typeof id !== 'string' || id.length === 0) {
      throw new IdempotencyConfigError([`inbox message id: expected a non-empty string, got ${JSON.stringify(id)}`]);
    }
  }
}
