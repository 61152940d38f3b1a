import { Module } from '@nestjs/common';
import { PaymentEventsRepository } from './payment-events.repository';
import { WebhooksController } from './webhooks.controller';

@Module({
  controllers: [WebhooksController],
  providers: [PaymentEventsRepository],
})
export class WebhooksModule {}
