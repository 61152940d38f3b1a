import { setTimeout as sleep } from 'node:timers/promises';
import { currentStep, Step, Workflow } from '../../lib';
import { OrderEffectsRepository } from './order-effects.repository';

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
  reservationId: string;
  confirmationId: string;
}

/** Slows each step down (ms) so the demo can kill the worker in the middle of one. */
const STEP_DELAY_MS = Number(process.env.ORDER_STEP_DELAY_MS ?? 0);

/**
 * charge → reserve stock → send confirmation. Each step writes to its own table keyed by
 * `currentStep().idempotencyKey`, which is what a real payment or e-mail API would receive.
 */
@Workflow({ name: 'process-order', identity: 'caller_provided' })
export class ProcessOrderWorkflow {
  constructor(private readonly effects: OrderEffectsRepository) {}

  async run(input: OrderInput): Promise<OrderResult> {
    const chargeId = await this.charge(input.orderId, input.amount);
    const reservationId = await this.reserveStock(input.orderId, input.sku, input.quantity);
    const confirmationId = await this.sendConfirmation(input.orderId, chargeId, reservationId);
    return { orderId: input.orderId, chargeId, reservationId, confirmationId };
  }

  @Step({ attempts: 3, backoff: { type: 'exponential', delay: 200 } })
  async charge(orderId: string, amount: number): Promise<string> {
    return this.effect('charge', 'order_charges', orderId, { amount });
  }

  @Step({ name: 'reserve-stock', attempts: 3, backoff: 200 })
  async reserveStock(orderId: string, sku: string, quantity: number): Promise<string> {
    return this.effect('reserve-stock', 'order_reservations', orderId, { sku, quantity });
  }

  @Step({ name: 'send-confirmation', attempts: 5, backoff: { type: 'exponential', delay: 200 }, timeout: '10s' })
  async sendConfirmation(orderId: string, chargeId: string, reservationId: string): Promise<string> {
    return this.effect('send-confirmation', 'order_confirmations', orderId, { chargeId, reservationId });
  }

  private async effect(
    step: string,
    table: 'order_charges' | 'order_reservations' | 'order_confirmations',
    orderId: string,
    detail: Record<string, unknown>,
  ): Promise<string> {
    const { idempotencyKey } = currentStep();
    await this.effects.countRun(orderId, step);
    if (STEP_DELAY_MS > 0) await sleep(STEP_DELAY_MS);
    await this.effects.write(table, idempotencyKey, orderId, detail);
    return `${step}:${idempotencyKey}`;
  }
}
