import { Module } from '@nestjs/common';
import { OrderEffectsRepository } from './order-effects.repository';
import { OrdersController } from './orders.controller';
import { ProcessOrderWorkflow } from './process-order.workflow';

/** Orders processed by ProcessOrderWorkflow (needs Redis: registered only when REDIS_URL is set). */
@Module({
  controllers: [OrdersController],
  providers: [OrderEffectsRepository, ProcessOrderWorkflow],
})
export class OrdersModule {}
