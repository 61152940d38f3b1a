// The library's behaviour as an application sees it (HTTP interceptor, method guard, workflows), on the real
// stack and on IdempotencyTestingModule: a unit test written against the testing module sees what production does.
import { BadRequestException, Body, Controller, Injectable, InternalServerErrorException, Param, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import request from 'supertest';
import {
  IdempotentMethod, Step, StepFailedError, Workflow, WorkflowClient, WorkflowConflictError, WorkflowExistsError, WorkflowFailedError,
} from '../../lib';
import { Runs } from '../support/http-harness';
import { gate, waitUntil } from '../support/resilience';
import { APP_IMPLEMENTATIONS, appForSuite } from './app-implementations';

/** Held requests wait here until the test opens their gate. */
const held = new Map<string, ReturnType<typeof gate>>();

@Controller('engine')
class EngineController {
  constructor(private readonly runs: Runs) {}

  @Post('orders')
  create(@Body() body: { item: string }): { run: number; item: string } {
    return { run: this.runs.inc('orders'), item: body.item };
  }

  @Post('held/:id')
  async held(@Param('id') id: string): Promise<{ run: number }> {
    const run = this.runs.inc(`held-${id}`);
    await held.get(id)?.promise;
    return { run };
  }

  @Post('boom/:id')
  boom(@Param('id') id: string): never {
    this.runs.inc(`boom-${id}`);
    throw new InternalServerErrorException('temporarily broken');
  }

  @Post('refuse/:id')
  refuse(@Param('id') id: string): never {
    this.runs.inc(`refuse-${id}`);
    throw new BadRequestException('not allowed');
  }
}

@Injectable()
class Billing {
  constructor(private readonly runs: Runs) {}

  @IdempotentMethod({ key: (invoice: string) => invoice })
  async bill(invoice: string, fail = false): Promise<{ invoice: string; run: number }> {
    const run = this.runs.inc(`bill-${invoice}`);
    if (fail) throw new Error('card declined');
    return Promise.resolve({ invoice, run });
  }
}

@Workflow({ name: 'engine-order' })
class EngineOrderWorkflow {
  constructor(private readonly runs: Runs) {}

  async run(input: { id: string; failShip?: boolean }): Promise<{ charged: string; shipped: string }> {
    const charged = await this.charge(input.id);
    let shipped: string;
    try {
      shipped = await this.ship(input.id, input.failShip ?? false);
    } catch (err) {
      if (!(err instanceof StepFailedError)) throw err;
      shipped = await this.ship(`${input.id}-fallback`, false);
    }
    return { charged, shipped };
  }

  @Step()
  async charge(id: string): Promise<string> {
    return Promise.resolve(`charged-${id}-${this.runs.inc(`charge-${id}`)}`);
  }

  @Step({ attempts: 2 })
  async ship(id: string, fail: boolean): Promise<string> {
    this.runs.inc(`ship-${id}`);
    if (fail) throw new Error('no courier');
    return Promise.resolve(`shipped-${id}`);
  }
}

/** Fails its second step until the test heals it. */
@Workflow({ name: 'engine-failing-once' })
class FailingOnce {
  static readonly healed = new Set<string>();

  constructor(private readonly runs: Runs) {}

  async run(input: { id: string }): Promise<string> {
    await this.prepare(input.id);
    return this.flaky(input.id);
  }

  @Step()
  async prepare(id: string): Promise<void> {
    this.runs.inc(`prepare-${id}`);
    return Promise.resolve();
  }

  @Step()
  async flaky(id: string): Promise<string> {
    this.runs.inc(`flaky-${id}`);
    if (!FailingOnce.healed.has(id)) throw new Error('not yet');
    return Promise.resolve(`ok-${id}`);
  }
}

describe.each(APP_IMPLEMENTATIONS)('engine contract: $name', (implementation) => {
  const running = appForSuite(implementation, { controllers: [EngineController], providers: [Runs, Billing, EngineOrderWorkflow, FailingOnce] });
  const runs = () => running().app.get(Runs);
  const post = (path: string, key?: string) => {
    const req = request(running().url).post(path);
    return key === undefined ? req : req.set('Idempotency-Key', key);
  };

  it('HTTP: first request runs, a retry replays it with Idempotent-Replayed, another body under the key is 422', async () => {
    const key = randomUUID();
    const first = await post('/engine/orders', key).send({ item: 'kibble' });
    const retry = await post('/engine/orders', key).send({ item: 'kibble' });
    const other = await post('/engine/orders', key).send({ item: 'litter' });
    expect([first.status, first.headers['idempotent-replayed']]).toEqual([201, undefined]);
    expect([retry.status, retry.headers['idempotent-replayed'], retry.body]).toEqual([201, 'true', first.body]);
    expect(other.status).toBe(422);
    expect(other.headers['content-type']).toContain('application/problem+json');
    expect(runs().get('orders')).toBe(1);
  });

  it('HTTP: concurrent duplicates run once; the others get 409 with Retry-After while it runs, the replay after', async () => {
    const key = randomUUID();
    const id = randomUUID();
    held.set(id, gate());
    const first = post(`/engine/held/${id}`, key).send({}).then((r) => r);
    await waitUntil('the first request runs', () => runs().get(`held-${id}`) === 1);
    const duplicates = await Promise.all([1, 2, 3].map(() => post(`/engine/held/${id}`, key).send({}).then((r) => r)));
    expect(duplicates.map((r) => [r.status, typeof r.headers['retry-after']])).toEqual([[409, 'string'], [409, 'string'], [409, 'string']]);
    held.get(id)?.open();
    expect((await first).status).toBe(201);
    const after = await post(`/engine/held/${id}`, key).send({});
    expect([after.status, after.headers['idempotent-replayed']]).toEqual([201, 'true']);
    expect(runs().get(`held-${id}`)).toBe(1);
  });

  it('HTTP: a 5xx releases the key (the retry runs again); a 4xx is final and replayed', async () => {
    const id = randomUUID();
    const broken = randomUUID();
    expect((await post(`/engine/boom/${id}`, broken).send({})).status).toBe(500);
    expect((await post(`/engine/boom/${id}`, broken).send({})).status).toBe(500);
    expect(runs().get(`boom-${id}`)).toBe(2);

    const refused = randomUUID();
    expect((await post(`/engine/refuse/${id}`, refused).send({})).status).toBe(400);
    const replay = await post(`/engine/refuse/${id}`, refused).send({});
    expect([replay.status, replay.headers['idempotent-replayed']]).toEqual([400, 'true']);
    expect(runs().get(`refuse-${id}`)).toBe(1);
  });

  it('method guard: duplicates get the stored result; a failure unlocks the key', async () => {
    const billing = running().app.get(Billing);
    const invoice = randomUUID();
    await expect(billing.bill(invoice, true)).rejects.toThrow('card declined');
    const first = await billing.bill(invoice);
    await expect(billing.bill(invoice)).resolves.toEqual(first);
    expect(first).toEqual({ invoice, run: 2 });
    expect(runs().get(`bill-${invoice}`)).toBe(2);
  });

  it('workflows: a start runs the steps once; the same id replays the result; another input conflicts', async () => {
    const client = running().app.get(WorkflowClient);
    const id = randomUUID();
    const handle = await client.start(EngineOrderWorkflow, { id }, { workflowId: `order-${id}` });
    await expect(handle.result({ timeout: '20s' })).resolves.toEqual({ charged: `charged-${id}-1`, shipped: `shipped-${id}` });
    const again = await client.start(EngineOrderWorkflow, { id }, { workflowId: `order-${id}` });
    expect(again.executionId).toBe(handle.executionId);
    await expect(again.result()).resolves.toEqual({ charged: `charged-${id}-1`, shipped: `shipped-${id}` });
    await expect(client.start(EngineOrderWorkflow, { id: 'other' }, { workflowId: `order-${id}` })).rejects.toBeInstanceOf(WorkflowConflictError);
    await expect(client.start(EngineOrderWorkflow, { id }, { workflowId: `order-${id}`, onConflict: 'error' })).rejects.toBeInstanceOf(WorkflowExistsError);
    expect([runs().get(`charge-${id}`), runs().get(`ship-${id}`)]).toEqual([1, 1]);
    expect((await client.steps(handle.executionId)).map((s) => [s.position, s.name, s.status])).toEqual([[0, 'charge', 'completed'], [1, 'ship', 'completed']]);
  });

  it('workflows: a step failing every attempt is checkpointed as failed and caught by the workflow; a strict start of the same input is the same workflow', async () => {
    const client = running().app.get(WorkflowClient);
    const id = randomUUID();
    const handle = await client.start(EngineOrderWorkflow, { id, failShip: true });
    await expect(handle.result({ timeout: '20s' })).resolves.toEqual({ charged: `charged-${id}-1`, shipped: `shipped-${id}-fallback` });
    const steps = await client.steps(handle.executionId);
    expect(steps.map((s) => [s.name, s.status, s.attempts])).toEqual([['charge', 'completed', 1], ['ship', 'failed', 2], ['ship', 'completed', 1]]);
    expect(runs().get(`ship-${id}`)).toBe(2);
    const same = await client.start(EngineOrderWorkflow, { failShip: true, id });
    expect(same.workflowId).toBe(handle.workflowId);
  });

  it('workflows: an uncaught step failure fails the execution; resume re-runs only that step', async () => {
    const client = running().app.get(WorkflowClient);
    const id = randomUUID();
    const failing = await client.start(FailingOnce, { id }, { workflowId: `failing-${id}` });
    await expect(failing.result({ timeout: '20s' })).rejects.toBeInstanceOf(WorkflowFailedError);
    FailingOnce.healed.add(id);
    const resumed = await client.resume<string>(`failing-${id}`);
    await expect(resumed.result({ timeout: '20s' })).resolves.toBe(`ok-${id}`);
    expect([runs().get(`prepare-${id}`), runs().get(`flaky-${id}`)]).toEqual([1, 2]);
  });
});
