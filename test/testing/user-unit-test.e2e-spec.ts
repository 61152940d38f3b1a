// Written the way an application would unit-test its own controller, service and workflow with
// IdempotencyTestingModule: no Postgres, no Redis, no BullMQ; the HTTP requests go to the in-process app.
import { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { IdempotencyTestingModule, WorkflowClient, WorkflowFailedError } from '../../lib';
import { CheckoutController } from './example/checkout.controller';
import { CheckoutService } from './example/checkout.service';
import { FulfilOrderWorkflow } from './example/fulfil-order.workflow';
import { PaymentGateway } from './example/payment-gateway';

/** The test's fake payment API: records every charge; `failNext` makes the next calls fail. */
class FakeGateway {
  readonly charges: { orderId: string; amount: number; idempotencyKey: string }[] = [];
  failNext = 0;

  charge(orderId: string, amount: number, idempotencyKey: string): Promise<string> {
    if (this.failNext > 0) {
      this.failNext--;
      return Promise.reject(new Error('gateway timeout'));
    }
    this.charges.push({ orderId, amount, idempotencyKey });
    return Promise.resolve(`ch_${this.charges.length}`);
  }
}

describe('CheckoutController (unit, IdempotencyTestingModule)', () => {
  let app: INestApplication;
  let gateway: FakeGateway;

  beforeEach(async () => {
    gateway = new FakeGateway();
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyTestingModule.forRoot()],
      controllers: [CheckoutController],
      providers: [CheckoutService, FulfilOrderWorkflow, { provide: PaymentGateway, useValue: gateway }],
    }).compile();
    app = moduleRef.createNestApplication();
    app.useLogger(false);
    await app.init();
  });

  afterEach(async () => {
    await app.close();
  });

  it('a retried POST with the same key replays the first response and charges once', async () => {
    const first = await request(app.getHttpServer()).post('/checkout').set('Idempotency-Key', 'k-1').send({ orderId: 'o-1', amount: 10 });
    expect(first.status).toBe(201);
    expect(first.body).toEqual({ orderId: 'o-1', chargeId: 'ch_1' });
    expect(first.headers['idempotent-replayed']).toBeUndefined();

    const retry = await request(app.getHttpServer()).post('/checkout').set('Idempotency-Key', 'k-1').send({ orderId: 'o-1', amount: 10 });
    expect(retry.status).toBe(201);
    expect(retry.body).toEqual(first.body);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(gateway.charges).toHaveLength(1);
  });

  it('the same key with another body is refused with 422, and a missing key with 400', async () => {
    await request(app.getHttpServer()).post('/checkout').set('Idempotency-Key', 'k-2').send({ orderId: 'o-2', amount: 10 }).expect(201);
    const reused = await request(app.getHttpServer()).post('/checkout').set('Idempotency-Key', 'k-2').send({ orderId: 'o-2', amount: 99 });
    expect(reused.status).toBe(422);
    expect(reused.headers['content-type']).toContain('application/problem+json');
    await request(app.getHttpServer()).post('/checkout').send({ orderId: 'o-3', amount: 10 }).expect(400);
    expect(gateway.charges).toEqual([{ orderId: 'o-2', amount: 10, idempotencyKey: 'checkout:o-2' }]);
  });

  it('the @IdempotentMethod service charges an order once across calls, and again after a failure', async () => {
    const service = app.get(CheckoutService);
    gateway.failNext = 1;
    await expect(service.charge('o-4', 5)).rejects.toThrow('gateway timeout');
    const first = await service.charge('o-4', 5);
    const second = await service.charge('o-4', 5);
    expect(second).toEqual(first);
    expect(gateway.charges).toHaveLength(1);
  });

  it('a workflow runs its steps in process: a failed attempt is retried with the same step key, a repeated start runs nothing', async () => {
    gateway.failNext = 1;
    const done = await request(app.getHttpServer()).post('/checkout/fulfil').send({ orderId: 'o-5', amount: 7 });
    expect(done.status).toBe(201);
    expect(done.body).toEqual({ chargeId: 'ch_1', shipment: 'shipment-of-o-5' });

    const workflows = app.get(WorkflowClient);
    const handle = await workflows.getHandle('fulfil-o-5');
    const steps = await workflows.steps(handle.executionId);
    expect(steps.map((s) => [s.position, s.name, s.status, s.attempts])).toEqual([[0, 'charge', 'completed', 2], [1, 'ship', 'completed', 1]]);
    expect(gateway.charges).toEqual([{ orderId: 'o-5', amount: 7, idempotencyKey: `${handle.executionId}:0` }]);

    const again = await workflows.start(FulfilOrderWorkflow, { orderId: 'o-5', amount: 7 }, { workflowId: 'fulfil-o-5' });
    expect(again.executionId).toBe(handle.executionId);
    await expect(again.result()).resolves.toEqual({ chargeId: 'ch_1', shipment: 'shipment-of-o-5' });
    expect(gateway.charges).toHaveLength(1);
  });

  it('a step that fails every attempt fails the workflow with its error', async () => {
    gateway.failNext = 3;
    const handle = await app.get(WorkflowClient).start(FulfilOrderWorkflow, { orderId: 'o-6', amount: 1 });
    await expect(handle.result()).rejects.toBeInstanceOf(WorkflowFailedError);
    await expect(handle.status()).resolves.toBe('failed');
    expect(gateway.charges).toHaveLength(0);
  });
});
