import { INestApplication } from '@nestjs/common';
import { join } from 'node:path';
import { WorkflowClient } from '../../lib';
import { sql } from '../support/test-app';
import { Child, kill, spawnWorker } from '../workflow/processes';
import { bootWorkflowApp, scenario } from '../workflow/support';
import { LimitedWorkflow } from './fixtures/limited.workflow';

jest.setTimeout(90_000); // two real worker processes; every wait is bounded

const FIXTURE = join(__dirname, 'fixtures', 'worker-app.ts');
const MAX = 20;
const JOBS = 100;

describe('queues.<name>.rateLimit across instances', () => {
  const s = scenario();
  const queues = { 'limited-steps': { rateLimit: `${MAX}/s` } };
  let app: INestApplication;
  let client: WorkflowClient;
  const children: Child[] = [];

  beforeAll(async () => {
    // A client-only instance starts the workflows; two worker processes share the limited step queue.
    ({ app, client } = await bootWorkflowApp(s, [LimitedWorkflow], { workers: false }, { queues }));
    children.push(spawnWorker(s, { QUEUES: JSON.stringify(queues) }, FIXTURE), spawnWorker(s, { QUEUES: JSON.stringify(queues) }, FIXTURE));
    await Promise.all(children.map((c) => c.line('READY')));
  });
  afterAll(async () => {
    for (const child of children) await kill(child, 'SIGTERM');
    await app.close();
  });

  it(`a rate of ${MAX}/s holds for both worker processes together`, async () => {
    const handles = await Promise.all(Array.from({ length: JOBS }, (_, i) => client.start(LimitedWorkflow, { id: `r${i}` }, { workflowId: `rate-${i}` })));
    await Promise.all(handles.map((h) => h.result({ timeout: '60s' })));
    const runs = await sql<{ ms: number; pid: number }>(
      `SELECT (extract(epoch FROM at) * 1000)::float8 AS ms, pid FROM "${s.schema}".step_runs WHERE step = 'call' AND phase = 'start' ORDER BY at`,
    );
    expect(runs).toHaveLength(JOBS);
    expect(new Set(runs.map((r) => r.pid)).size).toBe(2); // both processes took jobs: the limit is shared, not per process
    const first = runs[0].ms;
    // Completions per 1-second window from the first start. BullMQ's limiter is a fixed window that opens at the first
    // job after the previous one closed, so one of our windows can overlap two of its windows: at most 2 × MAX.
    // A limiter per process (2 × MAX per window of its own) could reach 4 × MAX in such a window.
    const perWindow = new Map<number, number>();
    for (const r of runs) perWindow.set(Math.floor((r.ms - first) / 1000), (perWindow.get(Math.floor((r.ms - first) / 1000)) ?? 0) + 1);
    expect(Math.max(...perWindow.values())).toBeLessThanOrEqual(2 * MAX);
    // The sharper check: JOBS starts need ceil(JOBS / MAX) limiter windows, which open at least 1 s apart, so the last
    // start comes at least (ceil(JOBS / MAX) - 1) s after the first. 300 ms of slack covers the time between BullMQ
    // admitting a job and its step recording the start (the first start may be recorded late, shortening the span).
    // One limiter per process would let the whole batch through in about half that span. Load only lengthens it.
    const spanMs = runs[runs.length - 1].ms - first;
    expect(spanMs).toBeGreaterThanOrEqual((Math.ceil(JOBS / MAX) - 1) * 1000 - 300);
  });
});
