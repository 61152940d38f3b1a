import { BadRequestException } from '@nestjs/common';

/** A webhook event as the payment provider sends it (at least once). */
export interface PaymentEvent {
  id: string;
  type: string;
  /** `orderId`: the order a `payment.confirmed` event confirms. */
  data?: { paymentId?: string; orderId?: string };
}

/** Checks the webhook body by hand; a bad body is a 400. */
export function parsePaymentEvent(body: unknown): PaymentEvent {
  const event = body as Partial<PaymentEvent> | null;
  if (!event || typeof event.id !== 'string' || event.id.length === 0 || typeof event.type !== 'string') {
    throw new BadRequestException('expected { id: string, type: string, data?: { paymentId?: string, orderId?: string } }');
  }
  return { id: event.id, type: event.type, data: event.data };
}
