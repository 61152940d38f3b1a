import type { OutboxDelivery } from '../../lib';
import type { Payment } from '../payments/payment';

/** The event a charge publishes through the outbox, in the charge's own transaction. */
export const PAYMENT_CREATED = 'payment.created';

/** The BullMQ queue the relay adds `payment.created` jobs to (job id = message id), unless OUTBOX_PAYMENTS_QUEUE names another. */
export const DEFAULT_PAYMENT_EVENTS_QUEUE = 'payment-events';

/** What a consumer of `payment.created` receives (the BullMQ job data, or the handler's delivery). */
export type PaymentCreated = Pick<OutboxDelivery<Payment>, 'id' | 'payload'>;
