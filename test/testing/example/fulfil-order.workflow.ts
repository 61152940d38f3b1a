import { currentStep, Step, Workflow } from '../../../lib';
import { PaymentGateway } from './payment-gateway';

/** Input of the example workflow. */
export interface FulfilOrder {
  orderId: string;
  amount: number;
}

/** Charges, then ships: two durable steps. */
@Workflow({ name: 'fulfil-order' })
export class FulfilOrderWorkflow {
  constructor(private readonly gateway: PaymentGateway) {}

  async run(input: FulfilOrder): Promise<{ chargeId: string; shipment: string }> {
    const chargeId = await this.charge(input.orderId, input.amount);
    const shipment = await this.ship(input.orderId);
    return { chargeId, shipment };
  }

  @Step({ attempts: 3 })
  async charge(orderId: string, amount: number): Promise<string> {
    return this.gateway.charge(orderId, amount, currentStep().idempotencyKey);
  }

  @Step()
  async ship(orderId: string): Promise<string> {
    return Promise.resolve(`shipment-of-${orderId}`);
  }
}
