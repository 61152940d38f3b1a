import { INestApplication } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { WorkflowClient } from '../../lib';
import { PgStatementCounter, withPort } from '../support/pg-statement-counter';
import { sql } from '../support/test-app';
import { gateOf, GatedWorkflow } from './fixtures/gated.workflow';
import { bootWorkflowApp, scenario } from './support';

jest.setTimeout(60_000);

const WAITING = 10;
const POLL_MS = 50;
/** The observation window: 20 polls, fewer than the 30 after which a waiter falls back to reading Postgres once. */
const WINDOW_MS = 20 * POLL_MS;

// Issue 7 item 7: waiting steps and handle.result() are woken by events; while a step runs they do not poll Postgres.
describe('waits are woken by events, not by polling Postgres', () => {
  let counter: PgStatementCounter;
  let worker: INestApplication;
  let starter: INestApplication;
  let client: WorkflowClient;
  const s = scenario();

  beforeAll(async () => {
    counter = new PgStatementCounter(Number(new URL(s.databaseUrl).port));
    const counted = { ...s, databaseUrl: withPort(s.databaseUrl, await counter.listen()) };
    const quiet = { pollInterval: POLL_MS, recoveryInterval: '1h' };
    ({ app: worker } = await bootWorkflowApp(counted, [GatedWorkflow], quiet, { retention: { cleanupInterval: false } }));
    // A client-only app: its handles hear about the finish only through BullMQ events, as another process would.
    ({ app: starter, client } = await bootWorkflowApp(counted, [GatedWorkflow], { ...quiet, workers: false }, { retention: { cleanupInterval: false } }));
  });
  afterAll(async () => {
    for (let i = 0; i < WAITING; i++) gateOf(`ev-${i}`).open();
    await starter?.close();
    await worker?.close();
    await counter?.close();
  });

  it(`${WAITING} held steps and their result() waiters read Postgres at most once each (the fallback) while held`, async () => {
    const handles = await Promise.all(Array.from({ length: WAITING }, (_, i) => client.start(GatedWorkflow, { value: i }, { workflowId: `ev-${i}` })));
    const results = handles.map((h) => h.result({ timeout: '50s' }));
    for (const r of results) r.catch(() => undefined);
    // Every held step is running (its body has begun); from here nothing but the waits themselves touches Postgres.
    for (let started = 0; started < WAITING; await sleep(50)) {
      [{ n: started }] = await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "${s.schema}".step_runs WHERE step = 'held' AND phase = 'start'`);
    }
    const before = counter.count;
    await sleep(WINDOW_MS);
    const reads = counter.count - before;
    // Polling Postgres, 2 × WAITING waiters would read about 20 times each in the window.
    expect(reads).toBeLessThanOrEqual(2 * WAITING);

    for (let i = 0; i < WAITING; i++) gateOf(`ev-${i}`).open();
    expect(await Promise.all(results)).toEqual(Array.from({ length: WAITING }, (_, i) => ({ first: i + 1, held: (i + 1) * 10, last: (i + 1) * 10 + 5 })));
    // The counter sees this app's statements: finishing the workflows (checkpoints, finishes) went through it.
    expect(counter.count - before - reads).toBeGreaterThanOrEqual(3 * WAITING);
  });
});
