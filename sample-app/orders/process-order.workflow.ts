import { recv, runChild, setEvent, Step, Workflow } from '../../lib';
import { OrderEffectsRepository } from './order-effects.repository';
import { ShipOrderWorkflow } from './ship-order.workflow';

/** Input of ProcessOrderWorkflow. */
export interface OrderInput {
  orderId: string;
  amount: number;
  sku: string;
  quantity: number;
}

/** Result of ProcessOrderWorkflow. */
export interface OrderResult {
  orderId: string;
  chargeId: string;
  paymentEventId: string;
  reservationId: string;
  confirmationId: string;
}

/** What the payment webhook sends the order (through the inbox) once the provider confirms the payment. */
export interface PaymentConfirmed {
  eventId: string;
  paymentId: string | null;
}

/** The message topic of payment confirmations. */
export const PAYMENT_CONFIRMED = 'payment.confirmed';

/** How long an order waits for the provider's confirmation before it gives up. */
const CONFIRMATION_TIMEOUT = process.env.ORDER_CONFIRMATION_TIMEOUT ?? '1h';

/**
 * charge → wait for the provider's `payment.confirmed` webhook → ship (a child workflow). Each step writes to its own
 * table keyed by `currentStep().idempotencyKey`, which is what a real payment or e-mail API would receive. Progress is
 * published with `setEvent('status', …)`: `GET /orders/:id` shows it. While it waits for the confirmation the order
 * holds no worker: a crash or a restart meanwhile changes nothing.
 */
@Workflow({ name: 'process-order', identity: 'caller_provided' })
export class ProcessOrderWorkflow {
  constructor(private readonly effects: OrderEffectsRepository) {}

  async run(input: OrderInput): Promise<OrderResult> {
    await setEvent('status', 'charging');
    const chargeId = await this.charge(input.orderId, input.amount);
    await setEvent('status', 'awaiting-payment-confirmation');
    const confirmation = await recv<PaymentConfirmed>(PAYMENT_CONFIRMED, { timeout: CONFIRMATION_TIMEOUT });
    if (!confirmation) {
      await setEvent('status', 'payment-not-confirmed');
      throw new Error(`the payment of order ${input.orderId} was not confirmed within ${CONFIRMATION_TIMEOUT}`);
    }
    await setEvent('status', 'shipping');
    const shipment = await runChild(ShipOrderWorkflow, { orderId: input.orderId, sku: input.sku, quantity: input.quantity, chargeId });
    await setEvent('status', 'completed');
    return { orderId: input.orderId, chargeId, paymentEventId: confirmation.eventId, ...shipment };
  }

  // The payment provider's calls go through the `stripe` queue, whose rate limit (module option `queues.stripe`) holds across all instances.
  @Step({ queue: 'stripe', attempts: 3, backoff: { type: 'exponential', delay: 200 } })
  async charge(orderId: string, amount: number): Promise<string> {
    return this.effects.runStep('charge', 'order_charges', orderId, { amount });
  }
}
