import { BadRequestException, Body, Controller, Get, HttpCode, Param, Post } from '@nestjs/common';
import { Idempotent, StepCheckpoint, WorkflowClient, WorkflowExecution } from '../../lib';
import { OrderEffectsRepository } from './order-effects.repository';
import { OrderInput, ProcessOrderWorkflow } from './process-order.workflow';

function parseOrder(body: unknown): OrderInput {
  const b = (body ?? {}) as Record<string, unknown>;
  const ok = typeof b.orderId === 'string' && /^[\w-]{1,64}$/.test(b.orderId) && Number.isInteger(b.amount) && (b.amount as number) > 0 &&
    typeof b.sku === 'string' && b.sku.length > 0 && Number.isInteger(b.quantity) && (b.quantity as number) > 0;
  if (!ok) throw new BadRequestException('expected { orderId: string, amount: positive integer, sku: string, quantity: positive integer }');
  return { orderId: b.orderId as string, amount: b.amount as number, sku: b.sku as string, quantity: b.quantity as number };
}

/** Orders: each is processed by a durable workflow with workflow id `order-<orderId>`. */
@Controller('orders')
export class OrdersController {
  constructor(
    private readonly workflows: WorkflowClient,
    private readonly effects: OrderEffectsRepository,
  ) {}

  @Post()
  @HttpCode(202)
  @Idempotent({ required: true })
  async create(@Body() body: unknown): Promise<{ orderId: string; workflowId: string; executionId: string; status: string }> {
    const order = parseOrder(body);
    const handle = await this.workflows.start(ProcessOrderWorkflow, order, { workflowId: `order-${order.orderId}` });
    return { orderId: order.orderId, workflowId: handle.workflowId, executionId: handle.executionId, status: await handle.status() };
  }

  /** The order's execution and checkpoints, the status it published (`setEvent`), its shipping child, and how often each step body ran. */
  @Get(':id')
  async get(@Param('id') id: string): Promise<{
    execution: WorkflowExecution;
    events: { status: unknown };
    steps: StepCheckpoint[];
    children: WorkflowExecution[];
    stepRuns: Record<string, number>;
  }> {
    const handle = await this.workflows.getHandle(`order-${id}`);
    const execution = await handle.execution();
    return {
      execution,
      events: { status: await this.workflows.getEvent(`order-${id}`, 'status') },
      steps: await this.workflows.steps(handle.executionId),
      children: await this.workflows.list({ parentExecutionId: handle.executionId }),
      stepRuns: await this.effects.runs(id),
    };
  }
}
