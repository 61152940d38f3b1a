import { Step, Workflow } from '../../lib';
import { OrderEffectsRepository } from './order-effects.repository';

/** Input of ShipOrderWorkflow. */
export interface ShipmentInput {
  orderId: string;
  sku: string;
  quantity: number;
  chargeId: string;
}

/** Result of ShipOrderWorkflow. */
export interface ShipmentResult {
  reservationId: string;
  confirmationId: string;
}

/**
 * reserve stock → send confirmation: the shipping part of an order, run by ProcessOrderWorkflow as a child workflow
 * (`runChild`). Its id is derived from the order's execution and the call's position, so a recovered order never
 * ships twice; cancelling the order cancels it.
 */
@Workflow({ name: 'ship-order' })
export class ShipOrderWorkflow {
  constructor(private readonly effects: OrderEffectsRepository) {}

  async run(input: ShipmentInput): Promise<ShipmentResult> {
    const reservationId = await this.reserveStock(input.orderId, input.sku, input.quantity);
    const confirmationId = await this.sendConfirmation(input.orderId, input.chargeId, reservationId);
    return { reservationId, confirmationId };
  }

  @Step({ name: 'reserve-stock', attempts: 3, backoff: 200 })
  async reserveStock(orderId: string, sku: string, quantity: number): Promise<string> {
    return this.effects.runStep('reserve-stock', 'order_reservations', orderId, { sku, quantity });
  }

  @Step({ name: 'send-confirmation', attempts: 5, backoff: { type: 'exponential', delay: 200 }, timeout: '10s' })
  async sendConfirmation(orderId: string, chargeId: string, reservationId: string): Promise<string> {
    return this.effects.runStep('send-confirmation', 'order_confirmations', orderId, { chargeId, reservationId });
  }
}
