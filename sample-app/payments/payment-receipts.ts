import { Injectable, Logger } from '@nestjs/common';
import { Task, TaskClient, TaskHandle } from '../../lib';
import { LedgerRepository } from './ledger.repository';

/** What a receipt says; the task's stored result. */
export interface Receipt {
  receiptNumber: string;
  paymentId: string;
  amount: number;
  currency: string;
}

/**
 * Payment receipts, sent by a `@Task` in the background with task id `receipt-<payment id>`: a retried request, a
 * duplicate enqueue or a second worker never sends a second receipt for one payment. Registered when the app has
 * Redis (tasks run on BullMQ).
 */
@Injectable()
export class PaymentReceipts {
  private readonly logger = new Logger('Receipts');
  /** Receipts this process sent, per payment (the demo shows it stays at one). */
  private readonly sent = new Map<string, number>();

  constructor(
    private readonly ledger: LedgerRepository,
    private readonly tasks: TaskClient,
  ) {}

  /** Enqueues the receipt of a payment, or returns the task that already sends (or sent) it. */
  request(paymentId: string): Promise<TaskHandle<Receipt>> {
    return this.tasks.enqueue(PaymentReceipts, 'send', [paymentId], { taskId: `receipt-${paymentId}` });
  }

  /** How many receipts this process sent for a payment. */
  sends(paymentId: string): number {
    return this.sent.get(paymentId) ?? 0;
  }

  /**
   * Sends the receipt. Enqueued from the charge's own transaction, it may run before that transaction commits: it
   * waits for the ledger row by retrying (a charge that rolls back never gets a receipt; its task ends failed).
   */
  @Task({ name: 'send-payment-receipt', queue: 'receipts', attempts: 6, backoff: { type: 'exponential', delay: 100 } })
  async send(paymentId: string): Promise<Receipt> {
    const payment = await this.ledger.findById(paymentId);
    if (!payment) throw new Error(`payment ${paymentId} is not in the ledger (yet)`);
    this.sent.set(paymentId, this.sends(paymentId) + 1);
    this.logger.log(`receipt sent for payment ${paymentId}`);
    return { receiptNumber: `RCPT-${paymentId.slice(0, 8).toUpperCase()}`, paymentId, amount: payment.amount, currency: payment.currency };
  }
}
