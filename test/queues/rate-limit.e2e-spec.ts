import { INestApplication } from '@nestjs/common';
import Redis from 'ioredis';
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
    const runs = await sql<{ workflow_id: string; pid: number }>(`SELECT workflow_id, pid FROM "${s.schema}".step_runs WHERE step = 'call' AND phase = 'start'`);
    // Every step ran; one may have run twice (at-least-once: a worker whose event loop stalled past the tests' 1.5 s
    // lock under load has its job run again). Each run was admitted by the limiter, so the bounds below still hold.
    expect(new Set(runs.map((r) => r.workflow_id)).size).toBe(JOBS);
    expect(new Set(runs.map((r) => r.pid)).size).toBe(2); // both processes took jobs: the limit is shared, not per process

    // Admission times from BullMQ itself: the script that counts a job against the limiter also appends its "active"
    // event, whose stream id is Redis's clock at that moment. (The steps' own start records come later, by as much as
    // the machine's load delays them, and bunch up: they cannot bound a window.)
    const admitted = await admissionTimes(s.redisUrl, `${s.prefix}:limited-steps:events`);
    expect(admitted.length).toBeGreaterThanOrEqual(JOBS);
    // BullMQ's limiter is a fixed window that opens at the first admission after the previous one expired, so any
    // second [t, t + 1 s) overlaps at most two of its windows: at most 2 × MAX admissions. One limiter per process
    // (MAX per window each) would reach 2 × MAX in one window of its own and up to 4 × MAX across two.
    let busiest = 0;
    for (let i = 0, j = 0; i < admitted.length; i++) {
      while (admitted[j] < admitted[i] - 999) j++;
      busiest = Math.max(busiest, i - j + 1);
    }
    expect(busiest).toBeLessThanOrEqual(2 * MAX);
    // The sharper check: JOBS admissions need ceil(JOBS / MAX) limiter windows, which open at least 1 s apart, so the
    // last comes at least (ceil(JOBS / MAX) - 1) s after the first (Redis's millisecond expiry: 10 ms of slack).
    // One limiter per process would let the whole batch through in about half that span. Load only lengthens it.
    const spanMs = admitted[admitted.length - 1] - admitted[0];
    expect(spanMs).toBeGreaterThanOrEqual((Math.ceil(JOBS / MAX) - 1) * 1000 - 10);
  });
});

/** The Redis times (ms) of every "active" event on a BullMQ events stream, in order. */
async function admissionTimes(url: string, stream: string): Promise<number[]> {
  const redis = new Redis(url);
  try {
    const entries = await redis.xrange(stream, '-', '+');
    return entries.filter(([, fields]) => fields[fields.indexOf('event') + 1] === 'active').map(([id]) => Number(id.split('-')[0]));
  } finally {
    redis.disconnect();
  }
}
