import { Controller, Get, Param, ParseUUIDPipe } from '@nestjs/common';
import { PaymentNotificationsRepository } from './payment-notifications.repository';

@Controller('notifications')
export class NotificationsController {
  constructor(private readonly notifications: PaymentNotificationsRepository) {}

  /** How many notifications a payment produced (should be 1), and how many consumer runs it took. */
  @Get('payments/:paymentId')
  async forPayment(@Param('paymentId', ParseUUIDPipe) paymentId: string): Promise<{ paymentId: string; notifications: number; runs: number }> {
    return { paymentId, ...(await this.notifications.countFor(paymentId)) };
  }
}
