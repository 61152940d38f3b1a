import { Injectable } from '@nestjs/common';
import { InboxService } from '../../lib';
import type { PaymentCreated } from './payment-created';
import { PaymentNotificationsRepository } from './payment-notifications.repository';

/**
 * Notifies the customer of a new payment, once per outbox message however often it arrives: the relay delivers at
 * least once (again after a crash between delivering and marking), so the work runs through the inbox, keyed by the
 * message id. A crash mid-run rolls the notification back with the inbox entry; a redelivery after commit is skipped.
 */
@Injectable()
export class PaymentNotifier {
  constructor(
    private readonly inbox: InboxService,
    private readonly notifications: PaymentNotificationsRepository,
  ) {}

  async onPaymentCreated(event: PaymentCreated): Promise<'processed' | 'duplicate'> {
    await this.notifications.countRun(event.id, event.payload.id);
    const outcome = await this.inbox.process(event.id, 'payment-notifications', (manager) => this.notifications.insert(manager, event.id, event.payload.id));
    return outcome.status;
  }
}
