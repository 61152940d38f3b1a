import { Injectable, INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { randomUUID } from 'node:crypto';
import {
  IdempotencyConfigError, IdempotencyModule, Step, Workflow, WorkflowCancelledError, WorkflowClient, WorkflowDefinitionError,
} from '../../lib';
import { waitUntil } from '../support/resilience';
import { databaseUrl, redisUrl, sql, uniqueSchema } from '../support/test-app';
import { failing, GatedWorkflow, gateOf } from './fixtures/gated.workflow';
import { bootWorkflowApp, scenario } from './support';

jest.setTimeout(60_000); // real processes and servers; waits are bounded by the assertions' own timeouts

@Injectable()
class PricingService {
  readonly rate = 3;

  quote(amount: number): number {
    return amount * this.rate;
  }
}

@Workflow({ name: 'priced' })
class PricedWorkflow {
  constructor(private readonly pricing: PricingService) {}

  async run(input: { amount: number }): Promise<number> {
    return this.price(input.amount);
  }

  @Step()
  price(amount: number): Promise<number> {
    return Promise.resolve(this.pricing.quote(amount)); // a constructor-injected service inside a step
  }
}

const handledFlags = { flakyFails: true, gateFails: true };
const handledRuns: string[] = [];

@Workflow({ name: 'handled' })
class HandledWorkflow {
  async run(_input: { n: number }): Promise<string> {
    let r: string;
    try {
      r = await this.flaky();
    } catch {
      r = await this.fallback();
    }
    await this.gate();
    return r;
  }

  @Step()
  flaky(): Promise<string> {
    handledRuns.push('flaky');
    return handledFlags.flakyFails ? Promise.reject(new Error('flaky down')) : Promise.resolve('flaky-ok');
  }

  @Step()
  fallback(): Promise<string> {
    handledRuns.push('fallback');
    return Promise.resolve('fallback');
  }

  @Step()
  gate(): Promise<void> {
    handledRuns.push('gate');
    return handledFlags.gateFails ? Promise.reject(new Error('gate down')) : Promise.resolve();
  }
}

// SEMANTICS §2 lines 31–32.
describe('control: cancel, resume, list, inspect', () => {
  const s = scenario();
  let app: INestApplication;
  let client: WorkflowClient;

  beforeAll(async () => {
    ({ app, client } = await bootWorkflowApp(s, [GatedWorkflow, PricedWorkflow, PricingService, HandledWorkflow]));
  });
  afterAll(async () => {
    await app.close();
  });

  const runs = async (workflowId: string, step: string, phase = 'done') =>
    (await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "${s.schema}".step_runs WHERE workflow_id = $1 AND step = $2 AND phase = $3`, [workflowId, step, phase]))[0].n;

  it('31: cancel → the running step finishes, no further step starts, status cancelled; resume continues from the last checkpoint', async () => {
    const id = `cancel-${randomUUID().slice(0, 6)}`;
    const handle = await client.start(GatedWorkflow, { value: 1 }, { workflowId: id });
    await waitUntil('held running', async () => (await runs(id, 'held', 'start')) === 1);
    expect(await client.cancel(id)).toBe(true);
    expect(await handle.status()).toBe('cancelled');
    gateOf(id).open();
    await waitUntil('held checkpointed', async () => (await client.steps(handle.executionId)).length === 2);
    await expect(handle.result({ timeout: '20s' })).rejects.toBeInstanceOf(WorkflowCancelledError);
    await new Promise((resolve) => setTimeout(resolve, 500)); // give a wrongly started step every chance to show up
    expect(await runs(id, 'held')).toBe(1); // the running step finished
    expect(await runs(id, 'last')).toBe(0); // no further step started
    expect(await handle.status()).toBe('cancelled');
    expect(await client.cancel(id)).toBe(false); // nothing live left to cancel

    const resumed = await client.resume<{ last: number }>(id);
    expect(resumed.executionId).toBe(handle.executionId);
    expect(await resumed.result({ timeout: '20s' })).toEqual({ first: 2, held: 20, last: 25 });
    expect(await runs(id, 'first')).toBe(1);
    expect(await runs(id, 'held')).toBe(1);
    expect(await runs(id, 'last')).toBe(1);
  });

  it('31: resume retries only the failure that ended the execution; a failure the workflow caught stays history', async () => {
    const handle = await client.start(HandledWorkflow, { n: 1 }, { workflowId: `handled-${randomUUID().slice(0, 6)}` });
    await expect(handle.result({ timeout: '20s' })).rejects.toThrow();
    expect((await client.steps(handle.executionId)).map((c) => `${c.name}:${c.status}`)).toEqual(['flaky:failed', 'fallback:completed', 'gate:failed']);
    handledFlags.flakyFails = false; // would change the branch if flaky ran again
    handledFlags.gateFails = false;
    handledRuns.length = 0;
    const resumed = await client.resume<string>(handle.workflowId);
    expect(await resumed.result({ timeout: '20s' })).toBe('fallback');
    expect(handledRuns).toEqual(['gate']);
    expect((await client.steps(handle.executionId)).map((c) => `${c.name}:${c.status}`)).toEqual(['flaky:failed', 'fallback:completed', 'gate:completed']);
  });

  it('31: resume of a failed execution retries the failed step and keeps completed ones', async () => {
    const id = `resume-${randomUUID().slice(0, 6)}`;
    failing.add(id);
    gateOf(id).open();
    const handle = await client.start(GatedWorkflow, { value: 2 }, { workflowId: id });
    await expect(handle.result({ timeout: '20s' })).rejects.toThrow(/held failed/);
    expect((await client.steps(handle.executionId)).map((c) => [c.name, c.status])).toEqual([['first', 'completed'], ['held', 'failed']]);
    failing.delete(id);
    const resumed = await client.resume(id);
    expect(resumed.executionId).toBe(handle.executionId);
    expect(await resumed.result({ timeout: '20s' })).toEqual({ first: 3, held: 30, last: 35 });
    expect(await runs(id, 'first')).toBe(1);
    expect(await runs(id, 'held', 'start')).toBe(2);
    expect((await client.steps(handle.executionId)).map((c) => [c.name, c.status])).toEqual([
      ['first', 'completed'], ['held', 'completed'], ['last', 'completed'],
    ]);
  });

  it('31: executions and their steps can be listed and inspected', async () => {
    const handle = await client.start(PricedWorkflow, { amount: 5 }, { workflowId: 'list-1' });
    await handle.result({ timeout: '20s' });
    const listed = await client.list({ workflow: PricedWorkflow, status: 'completed' });
    expect(listed).toEqual([
      expect.objectContaining({ executionId: handle.executionId, workflowId: 'list-1', workflowName: 'priced', status: 'completed', input: { amount: 5 }, result: 15 }),
    ]);
    expect(await client.list({ workflow: 'priced', status: ['failed', 'cancelled'] })).toEqual([]);
    expect((await client.list({ limit: 1 })).length).toBe(1);
    expect(await client.steps(handle.executionId)).toEqual([
      expect.objectContaining({ position: 0, name: 'price', status: 'completed', result: 15, attempts: 1 }),
    ]);
    const byId = await client.getHandle('list-1');
    expect(byId.executionId).toBe(handle.executionId);
  });

  it('32: workflows are injectable: constructor-injected services work inside steps', async () => {
    const handle = await client.start(PricedWorkflow, { amount: 7 }, { workflowId: 'inject-1' });
    expect(await handle.result({ timeout: '20s' })).toBe(21);
  });
});

describe('bootstrap validation', () => {
  async function boot(providers: unknown[], extra: Record<string, unknown> = {}): Promise<INestApplication> {
    const moduleRef = await Test.createTestingModule({
      imports: [
        // redis: false — a failed bootstrap never reaches shutdown hooks, so nothing that keeps the process alive is opened.
        IdempotencyModule.forRoot({ postgres: { url: databaseUrl(), schema: uniqueSchema('wfdef') }, redis: false, migrationsRun: true, ...extra }),
      ],
      providers: providers as never[],
    }).compile();
    const app = moduleRef.createNestApplication();
    app.useLogger(false);
    await app.init();
    return app;
  }

  async function problems(providers: unknown[], extra: Record<string, unknown> = {}): Promise<string> {
    const err = await boot(providers, extra).then(async (app) => {
      await app.close();
      return undefined;
    }, (e: unknown) => e);
    // Connections opened by the failed bootstrap finish opening in the background; let them settle.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(err).toBeInstanceOf(WorkflowDefinitionError);
    return (err as Error).message;
  }

  it('a workflow without run(), duplicate names, duplicate step names and invalid step options fail bootstrap with WorkflowDefinitionError', async () => {
    @Workflow()
    class NoRun {}
    expect(await problems([NoRun])).toMatch(/NoRun: a workflow needs a run\(input\) method/);

    @Workflow({ name: 'same' })
    class A {
      async run(): Promise<void> {}
    }
    @Workflow({ name: 'same' })
    class B {
      async run(): Promise<void> {}
    }
    expect(await problems([A, B])).toMatch(/share the name "same"/);

    @Workflow()
    class DupSteps {
      async run(): Promise<void> {}
      @Step({ name: 'x' })
      async one(): Promise<void> {}
      @Step({ name: 'x' })
      async two(): Promise<void> {}
    }
    expect(await problems([DupSteps])).toMatch(/steps one and two share the name "x"/);

    @Workflow({ identity: 'sometimes' as never, timeout: 'soon' })
    class BadOptions {
      async run(): Promise<void> {}
      @Step({ attempts: 0, backoff: { type: 'linear', delay: 1 } as never, timeout: -1, queue: 'a b' })
      async step(): Promise<void> {}
    }
    const message = await problems([BadOptions]);
    for (const expected of [/identity must be one of/, /timeout: "soon" is not a duration/, /attempts must be a whole number/, /backoff must be/, /timeout: expected a non-negative/, /queue must be/]) {
      expect(message).toMatch(expected);
    }
  });

  it('workflows without Redis fail bootstrap; invalid workflow options fail with IdempotencyConfigError', async () => {
    @Workflow()
    class Fine {
      async run(): Promise<void> {}
    }
    expect(await problems([Fine])).toMatch(/need Redis/);
    const withRedis = { redis: { url: redisUrl() } };
    await expect(boot([Fine], { ...withRedis, workflows: { concurrency: 0, recoveryInterval: 'often', queuePrefix: '' } })).rejects.toThrow(IdempotencyConfigError);
    await expect(boot([Fine], { ...withRedis, workflows: { concurrency: 0 } })).rejects.toThrow(/workflows\.concurrency: expected a whole number/);
  });
});
