import { Injectable } from '@nestjs/common';
import { IdempotentMethod } from '../../../lib';
import { PaymentGateway } from './payment-gateway';

/** Charges an order once, however often it is asked to. */
@Injectable()
export class CheckoutService {
  constructor(private readonly gateway: PaymentGateway) {}

  @IdempotentMethod({ key: (orderId: string) => orderId })
  async charge(orderId: string, amount: number): Promise<{ orderId: string; chargeId: string }> {
    const chargeId = await this.gateway.charge(orderId, amount, `checkout:${orderId}`);
    return { orderId, chargeId };
  }
}
