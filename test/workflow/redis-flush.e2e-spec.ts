import { INestApplication } from '@nestjs/common';
import Redis from 'ioredis';
import { WorkflowClient, WorkflowHandle } from '../../lib';
import { waitUntil } from '../support/resilience';
import { ownRedis } from '../support/own-redis';
import { sql } from '../support/test-app';
import { OrderWorkflow } from './fixtures/order.workflow';
import { bootWorkflowApp, scenario } from './support';

jest.setTimeout(60_000); // real processes and servers; waits are bounded by the assertions' own timeouts

// SEMANTICS §2 line 28, on a dedicated Redis (FLUSHALL must not touch anyone else's data).
describe('Redis flushed while 20 workflows are in flight', () => {
  const name = `wf-flush-${process.pid}`;
  let app: INestApplication;
  let client: WorkflowClient;
  const redis = ownRedis(name, () => app?.close());

  it('28: every workflow completes; no step that was checkpointed before the flush runs again', async () => {
    const s = scenario({ redisUrl: redis.url });
    ({ app, client } = await bootWorkflowApp(s, [OrderWorkflow], { concurrency: 20 }));
    const handles: WorkflowHandle<{ results: string[] }>[] = [];
    for (let i = 0; i < 20; i++) handles.push(await client.start(OrderWorkflow, { orderId: `f${i}`, sleepMs: 150, steps: 4 }, { workflowId: `flush-${i}` }));
    // Flush once some steps are checkpointed and others are in flight.
    await waitUntil('some steps checkpointed', async () => (await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "${s.schema}".workflow_steps`))[0].n >= 20);
    const beforeFlush = await sql<{ workflow_id: string; position: number }>(
      `SELECT e.workflow_id, s.position FROM "${s.schema}".workflow_steps s JOIN "${s.schema}".workflow_executions e ON e.id = s.execution_id`,
    );
    const probe = new Redis(redis.url);
    await probe.flushall();
    probe.disconnect();
    const results = await Promise.all(handles.map((h) => h.result({ timeout: '90s' })));
    expect(results.map((r) => r.results.length)).toEqual(Array(20).fill(4));
    // A step checkpointed before the flush finished exactly once.
    const done = await sql<{ workflow_id: string; step: string; n: number }>(
      `SELECT workflow_id, step, count(*)::int AS n FROM "${s.schema}".step_runs WHERE phase = 'done' GROUP BY workflow_id, step`,
    );
    const doneCount = new Map(done.map((d) => [`${d.workflow_id}/${d.step}`, d.n]));
    expect(beforeFlush.length).toBeGreaterThanOrEqual(20);
    for (const c of beforeFlush) expect(doneCount.get(`${c.workflow_id}/work-${c.position}`)).toBe(1);
    // Every step has exactly one checkpoint.
    const [{ n }] = await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "${s.schema}".workflow_steps`);
    expect(n).toBe(80);
  }, 120_000);
});
