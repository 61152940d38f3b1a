import { Injectable } from '@nestjs/common';
import { OutboxDelivery, OutboxHandler } from '../../lib';
import type { Payment } from '../payments/payment';
import { PAYMENT_CREATED } from './payment-created';
import { PaymentNotifier } from './payment-notifier';

/** Without Redis there is no BullMQ: the relay calls this handler with `payment.created` instead. */
@Injectable()
export class PaymentCreatedHandler {
  constructor(private readonly notifier: PaymentNotifier) {}

  @OutboxHandler(PAYMENT_CREATED)
  async handle(delivery: OutboxDelivery<Payment>): Promise<void> {
    await this.notifier.onPaymentCreated(delivery);
  }
}
