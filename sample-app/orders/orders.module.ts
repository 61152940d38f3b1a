import { Module } from '@nestjs/common';
import { OrderEffectsRepository } from './order-effects.repository';
import { OrdersController } from './orders.controller';
import { ProcessOrderWorkflow } from './process-order.workflow';
import { ShipOrderWorkflow } from './ship-order.workflow';

/** Orders processed by ProcessOrderWorkflow, shipped by its child ShipOrderWorkflow (needs Redis: registered only when REDIS_URL is set). */
@Module({
  controllers: [OrdersController],
  providers: [OrderEffectsRepository, ProcessOrderWorkflow, ShipOrderWorkflow],
})
export class OrdersModule {}
