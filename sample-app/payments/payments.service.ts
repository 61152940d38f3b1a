import { Injectable, NotFoundException } from '@nestjs/common';
import type { CreatePaymentDto } from './create-payment.dto';
import { LedgerRepository } from './ledger.repository';
import type { Payment } from './payment';

@Injectable()
export class PaymentsService {
  constructor(private readonly ledger: LedgerRepository) {}

  /** Records a charge. Running it twice charges twice: the Idempotency-Key on the route prevents that. */
  charge(payment: CreatePaymentDto): Promise<Payment> {
    return this.ledger.insert(payment);
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
