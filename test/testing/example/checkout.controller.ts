import { Body, Controller, Post } from '@nestjs/common';
import { Idempotent, WorkflowClient } from '../../../lib';
import { CheckoutService } from './checkout.service';
import { FulfilOrder, FulfilOrderWorkflow } from './fulfil-order.workflow';

/** The example's HTTP face. */
@Controller('checkout')
export class CheckoutController {
  constructor(
    private readonly checkout: CheckoutService,
    private readonly workflows: WorkflowClient,
  ) {}

  @Post()
  @Idempotent({ required: true })
  pay(@Body() body: { orderId: string; amount: number }): Promise<{ orderId: string; chargeId: string }> {
    return this.checkout.charge(body.orderId, body.amount);
  }

  @Post('fulfil')
  async fulfil(@Body() body: FulfilOrder): Promise<{ chargeId: string; shipment: string }> {
    const handle = await this.workflows.start(FulfilOrderWorkflow, body, { workflowId: `fulfil-${body.orderId}` });
    return handle.result({ timeout: '10s' });
  }
}
