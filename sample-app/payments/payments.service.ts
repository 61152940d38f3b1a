import { Injectable, NotFoundException } from '@nestjs/common';
import { currentTransaction, OutboxService } from '../../lib';
import { PAYMENT_CREATED } from '../notifications/payment-created';
import type { CreatePaymentDto } from './create-payment.dto';
import { LedgerRepository } from './ledger.repository';
import type { Payment } from './payment';

@Injectable()
export class PaymentsService {
  constructor(
    private readonly ledger: LedgerRepository,
    private readonly outbox: OutboxService,
  ) {}

  /**
   * Records a charge and publishes `payment.created`. Running it twice charges twice: the Idempotency-Key on the
   * route prevents that. The event is stored in the charge's own transaction (the route is `transaction: true`), so
   * it leaves if and only if the charge commits; the outbox relay delivers it after the commit.
   */
  async charge(charge: CreatePaymentDto): Promise<Payment> {
    const payment = await this.ledger.insert(charge);
    await this.outbox.publish(currentTransaction(), { topic: PAYMENT_CREATED, payload: payment });
    return payment;
  }

  async get(id: string): Promise<Payment> {
    const payment = await this.ledger.findById(id);
    if (!payment) throw new NotFoundException(`payment ${id} not found`);
    return payment;
  }

  count(): Promise<number> {
    return this.ledger.count();
  }
}
