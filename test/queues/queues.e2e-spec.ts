import { INestApplication } from '@nestjs/common';
import { Queue } from 'bullmq';
import { IdempotencyConfigError, IdempotencyModuleOptions, RetentionService, WorkflowClient } from '../../lib';
import { sql } from '../support/test-app';
import { OrderWorkflow } from '../workflow/fixtures/order.workflow';
import { bootWorkflowApp, scenario } from '../workflow/support';
import { LimitedWorkflow } from './fixtures/limited.workflow';

jest.setTimeout(60_000);

/** The most step bodies of `limited-steps` that ran at the same time (from the run log's start/done rows). */
async function maxOverlap(schema: string): Promise<number> {
  const rows = await sql<{ phase: string }>(`SELECT phase FROM "${schema}".step_runs WHERE step = 'call' ORDER BY at, phase DESC`);
  let running = 0;
  let max = 0;
  for (const r of rows) {
    running += r.phase === 'start' ? 1 : -1;
    max = Math.max(max, running);
  }
  return max;
}

async function bootError(queues: IdempotencyModuleOptions['queues'], more: Partial<IdempotencyModuleOptions> = {}): Promise<Error> {
  const s = scenario();
  try {
    const { app } = await bootWorkflowApp(s, [LimitedWorkflow], {}, { queues, ...more });
    await app.close();
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected the app to fail at startup');
}

describe('queues option on workflow and step queues', () => {
  const apps: INestApplication[] = [];
  afterAll(async () => {
    for (const app of apps) await app.close();
  });

  it('concurrency: at most queues.<name>.concurrency steps of that queue run at once in an instance', async () => {
    const s = scenario();
    const { app, client } = await bootWorkflowApp(s, [LimitedWorkflow], { concurrency: 10 }, { queues: { 'limited-steps': { concurrency: 2 } } });
    apps.push(app);
    const handles = await Promise.all(Array.from({ length: 8 }, (_, i) => client.start(LimitedWorkflow, { id: `c${i}`, sleepMs: 300 }, { workflowId: `conc-${i}` })));
    await Promise.all(handles.map((h) => h.result({ timeout: '30s' })));
    expect(await maxOverlap(s.schema)).toBe(2); // not workflows.concurrency (10), and the two slots were used
  });

  it('priority: every job added to the queue carries it; equal priorities keep their order', async () => {
    const s = scenario();
    const queues = { 'limited-runs': { priority: 7 } };
    // A client-only instance adds the jobs; nothing takes them until the worker instance boots.
    const starter = await bootWorkflowApp(s, [LimitedWorkflow], { workers: false }, { queues });
    apps.push(starter.app);
    for (let i = 0; i < 4; i++) await starter.client.start(LimitedWorkflow, { id: `p${i}` }, { workflowId: `prio-${i}` });
    const queue = new Queue('limited-runs', { connection: { url: s.redisUrl }, prefix: s.prefix });
    try {
      const jobs = await queue.getJobs(['prioritized', 'wait']);
      expect(jobs.map((j) => j.opts.priority)).toEqual([7, 7, 7, 7]);
      expect(await queue.getJobCountByTypes('prioritized')).toBe(4);
    } finally {
      await queue.close();
    }
    const worker = await bootWorkflowApp(s, [LimitedWorkflow], { workflowConcurrency: 1, concurrency: 1 }, { queues });
    apps.push(worker.app);
    const client: WorkflowClient = worker.client;
    await Promise.all([0, 1, 2, 3].map(async (i) => (await client.getHandle(`prio-${i}`)).result({ timeout: '30s' })));
    const order = await sql<{ workflow_id: string }>(`SELECT workflow_id FROM "${s.schema}".step_runs WHERE phase = 'start' ORDER BY at`);
    expect(order.map((r) => r.workflow_id)).toEqual(['prio-0', 'prio-1', 'prio-2', 'prio-3']);
  });

  it('retention: cleanup removes finished executions of a queue after queues.<name>.retention, others after their own', async () => {
    const s = scenario();
    const { app, client } = await bootWorkflowApp(s, [LimitedWorkflow, OrderWorkflow], {}, { queues: { 'limited-runs': { retention: '1ms' } }, retention: { cleanupInterval: false } });
    apps.push(app);
    await (await client.start(LimitedWorkflow, { id: 'gone' }, { workflowId: 'ret-limited' })).result({ timeout: '30s' });
    await (await client.start(OrderWorkflow, { orderId: 'kept', steps: 1 }, { workflowId: 'ret-order' })).result({ timeout: '30s' });
    await new Promise((resolve) => setTimeout(resolve, 20)); // past the 1 ms retention
    const report = await app.get(RetentionService).cleanup();
    expect(report?.workflows).toBe(1);
    const left = await sql<{ workflow_id: string }>(`SELECT workflow_id FROM "${s.schema}".workflow_executions ORDER BY workflow_id`);
    expect(left.map((r) => r.workflow_id)).toEqual(['ret-order']);
  });

  it('an unknown queue name fails at startup, naming the option and listing the known queues', async () => {
    const err = await bootError({ 'limted-steps': { concurrency: 2 } });
    expect(err).toBeInstanceOf(IdempotencyConfigError);
    expect(err.message).toContain('queues.limted-steps: no workflow, step or task uses queue "limted-steps" (known queues: "limited-runs", "limited-steps")');
  });

  it('an unknown queue name in retention.queues fails at startup the same way (it would leave the queue at the default)', async () => {
    const err = await bootError(undefined, { retention: { queues: { 'limted-runs': '1d' } } });
    expect(err).toBeInstanceOf(IdempotencyConfigError);
    expect(err.message).toContain('retention.queues.limted-runs: no workflow or task uses queue "limted-runs" (known queues: "limited-runs", "limited-steps")');
  });

  it('a malformed rate or duration fails at startup, naming the option', async () => {
    const rate = await bootError({ 'limited-steps': { rateLimit: '100 per second' } });
    expect(rate).toBeInstanceOf(IdempotencyConfigError);
    expect(rate.message).toContain('queues.limited-steps.rateLimit: expected a rate such as "100/s", "20/min" or "5/h"');
    const duration = await bootError({ 'limited-steps': { retention: 'a month' } });
    expect(duration).toBeInstanceOf(IdempotencyConfigError);
    expect(duration.message).toContain('queues.limited-steps.retention');
  });
});
