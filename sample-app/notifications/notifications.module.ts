import { Module } from '@nestjs/common';
import { NotificationsController } from './notifications.controller';
import { PaymentCreatedHandler } from './payment-created.handler';
import { PaymentCreatedWorker } from './payment-created.worker';
import { PaymentNotificationsRepository } from './payment-notifications.repository';
import { PaymentNotifier } from './payment-notifier';

/**
 * Customer notifications for `payment.created`, the outbox event every charge publishes: a BullMQ worker consumes it
 * when the app has Redis, an `@OutboxHandler` otherwise (see outbox in config/idempotency-options.factory.ts).
 */
@Module({
  controllers: [NotificationsController],
  providers: [PaymentNotificationsRepository, PaymentNotifier, process.env.REDIS_URL ? PaymentCreatedWorker : PaymentCreatedHandler],
})
export class NotificationsModule {}
