import { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { ChildWorkflowFailedError, IdempotencyTestingModule, recv, runChild, setEvent, sleep, Step, Workflow, WorkflowClient } from '../../lib';

@Workflow({ name: 'mem-shipping' })
class ShippingWorkflow {
  async run(input: { fail: boolean }): Promise<string> {
    return this.ship(input.fail);
  }

  @Step()
  ship(fail: boolean): Promise<string> {
    return fail ? Promise.reject(new Error('no carrier')) : Promise.resolve('shipped');
  }
}

/** Sleeps, waits for a confirmation (with a timeout), publishes its status, and runs shipping as a child. */
@Workflow({ name: 'mem-order' })
class OrderWorkflow {
  async run(input: { failShipping: boolean }): Promise<unknown> {
    await setEvent('status', 'charging');
    await sleep(50);
    const confirmation = await recv<{ ok: boolean }>('payment.confirmed', { timeout: '5s' });
    await setEvent('status', 'confirmed');
    try {
      return { confirmation, shipping: await runChild(ShippingWorkflow, { fail: input.failShipping }) };
    } catch (err) {
      return { confirmation, shipping: err instanceof ChildWorkflowFailedError ? err.status : 'other error' };
    }
  }
}

// Issue 11 in the in-memory test mode: sleep, recv, events and children run in process with the same rules.
describe('IdempotencyTestingModule: workflows that wait and talk', () => {
  let app: INestApplication;
  let client: WorkflowClient;

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({ imports: [IdempotencyTestingModule.forRoot()], providers: [OrderWorkflow, ShippingWorkflow] }).compile();
    app = moduleRef.createNestApplication();
    app.useLogger(false);
    await app.init();
    client = app.get(WorkflowClient);
  });
  afterAll(async () => {
    await app.close();
  });

  it('runs sleep, recv (woken by send), setEvent and runChild in process', async () => {
    const handle = await client.start(OrderWorkflow, { failShipping: false }, { workflowId: 'mem-1' });
    await expect(client.getEvent('mem-1', 'status', { timeout: '5s' })).resolves.toBe('charging');
    await client.send('mem-1', { ok: true }, { topic: 'payment.confirmed', idempotencyKey: 'evt-1' });
    await client.send('mem-1', { ok: true }, { topic: 'payment.confirmed', idempotencyKey: 'evt-1' });
    await expect(handle.result({ timeout: '5s' })).resolves.toEqual({ confirmation: { ok: true }, shipping: 'shipped' });
    await expect(client.getEvent('mem-1', 'status')).resolves.toBe('confirmed');
    expect((await client.list({ parentExecutionId: handle.executionId })).map((e) => e.workflowName)).toEqual(['mem-shipping']);
  });

  it('a recv timeout gives null; a failed child is a ChildWorkflowFailedError', async () => {
    const handle = await client.start(OrderWorkflow, { failShipping: true }, { workflowId: 'mem-2' });
    await expect(handle.result({ timeout: '15s' })).resolves.toEqual({ confirmation: null, shipping: 'failed' });
  }, 20_000);
});
