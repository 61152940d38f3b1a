import { INestApplication } from '@nestjs/common';
import { WorkflowClient } from '../../lib';
import { sql } from '../support/test-app';
import { OrderWorkflow } from './fixtures/order.workflow';
import { Child, kill, spawnWorker } from './processes';
import { bootWorkflowApp, scenario } from './support';

jest.setTimeout(60_000); // real processes and servers; waits are bounded by the assertions' own timeouts

describe('several processes on the same queues', () => {
  const s = scenario();
  let app: INestApplication;
  let client: WorkflowClient;
  const children: Child[] = [];

  beforeAll(async () => {
    ({ app, client } = await bootWorkflowApp(s, [OrderWorkflow], { workers: false }));
  });
  afterAll(async () => {
    for (const child of children) await kill(child, 'SIGTERM');
    await app.close();
  });

  it('26: two worker processes → every workflow completes once; no step is checkpointed (or run) twice', async () => {
    const workers = [spawnWorker(s), spawnWorker(s)];
    children.push(...workers);
    await Promise.all(workers.map((w) => w.line('READY')));
    const handles = await Promise.all(
      Array.from({ length: 20 }, (_, i) => client.start(OrderWorkflow, { orderId: `m${i}`, sleepMs: 20, steps: 3 }, { workflowId: `multi-${i}` })),
    );
    const results = await Promise.all(handles.map((h) => h.result({ timeout: '60s' })));
    expect(results.map((r) => r.results.length)).toEqual(Array(20).fill(3));
    const perStep = await sql<{ n: number; pids: number }>(
      `SELECT count(*)::int AS n, count(DISTINCT pid)::int AS pids FROM "${s.schema}".step_runs WHERE phase = 'done' GROUP BY workflow_id, step`,
    );
    expect(perStep).toHaveLength(60);
    expect(perStep.every((r) => r.n === 1)).toBe(true);
    const pids = await sql<{ pid: number }>(`SELECT DISTINCT pid FROM "${s.schema}".step_runs`);
    expect(pids.length).toBe(2); // both processes did work
    const [{ n }] = await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "${s.schema}".workflow_steps`);
    expect(n).toBe(60);
    const statuses = await sql<{ status: string; n: number }>(`SELECT status, count(*)::int AS n FROM "${s.schema}".workflow_executions GROUP BY status`);
    expect(statuses).toEqual([{ status: 'completed', n: 20 }]);
  }, 120_000);

  it('22: 20 concurrent starts of one id from two processes → exactly one execution; every caller gets its id', async () => {
    const startAt = String(Date.now() + 4000);
    const starters = [0, 1].map(() => spawnWorker(s, { WF_MODE: 'starter', WF_START_AT: startAt, WF_STARTS: '10', WF_ID: 'race-1' }));
    children.push(...starters);
    const lines = await Promise.all(starters.map((p) => p.line('RESULT', 60_000)));
    const handles = lines.flatMap((l) => JSON.parse(l.slice('RESULT '.length)) as { workflowId: string; executionId: string }[]);
    expect(handles).toHaveLength(20);
    expect(new Set(handles.map((h) => h.workflowId))).toEqual(new Set(['race-1']));
    expect(new Set(handles.map((h) => h.executionId)).size).toBe(1);
    const rows = await sql(`SELECT id FROM "${s.schema}".workflow_executions WHERE workflow_id = 'race-1'`);
    expect(rows).toEqual([{ id: handles[0].executionId }]);
  }, 120_000);
});
