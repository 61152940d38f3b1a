import { SetMetadata } from '@nestjs/common';

/** Metadata key of `@OutboxHandler()` (namespaced; read only by OutboxHandlers). */
export const OUTBOX_HANDLER_METADATA = 'nestjs-idempotency:outbox-handler';

/**
 * Marks a provider method as the delivery target of an outbox topic configured `{ to: 'handler' }`. The relay calls
 * it with an `OutboxDelivery`; resolving marks the message delivered, throwing retries it with backoff. Delivery is
 * at least once: make the method idempotent (e.g. pass `delivery.id` on as an idempotency key, or use the inbox).
 */
export const OutboxHandler = (topic: string): MethodDecorator => SetMetadata(OUTBOX_HANDLER_METADATA, topic);
