import { INestApplication } from '@nestjs/common';
import { RetentionService, WorkflowClient, WorkflowFinishedError, WorkflowNotFoundError } from '../../lib';
import { waitUntil } from '../support/resilience';
import { sql } from '../support/test-app';
import { InboxWorkflow, WAIT_WORKFLOWS } from './fixtures/waits.workflows';
import { Child, kill, spawnWorker } from './processes';
import { bootWorkflowApp, Scenario, scenario } from './support';

jest.setTimeout(60_000); // real processes and servers; waits are bounded by the assertions' own timeouts

const waiting = (s: Scenario, workflowId: string) => async () => {
  const rows = await sql<{ n: number }>(
    `SELECT count(*)::int AS n FROM "${s.schema}".workflow_executions WHERE workflow_id = $1 AND status = 'pending' AND suspended_until IS NOT NULL`,
    [workflowId],
  );
  return rows[0].n === 1 || undefined;
};

// Issue 11: send() + recv(): durable messages, delivered exactly once in send order per topic.
describe('send() and recv()', () => {
  const s = scenario();
  let app: INestApplication;
  let client: WorkflowClient;

  beforeAll(async () => {
    ({ app, client } = await bootWorkflowApp(s, WAIT_WORKFLOWS, {}, { retention: { cleanupInterval: false } }));
  });
  afterAll(async () => {
    await app.close();
  });

  it('a message sent before the workflow reaches recv() waits for it (buffered)', async () => {
    const handle = await client.start(InboxWorkflow, { count: 1, beforeMs: 300 }, { workflowId: 'buffered' });
    await client.send('buffered', { paid: true });
    await expect(handle.result({ timeout: '20s' })).resolves.toEqual([{ paid: true }]);
    expect((await client.steps(handle.executionId)).map((c) => c.name)).toEqual(['pause', '@recv', 'note', '@setEvent']);
  });

  it('a message sent while the workflow waits (suspended) wakes it', async () => {
    const handle = await client.start(InboxWorkflow, { count: 1 }, { workflowId: 'waiting' });
    await waitUntil('the workflow waits', waiting(s, 'waiting'));
    await client.send('waiting', 'hello');
    await expect(handle.result({ timeout: '20s' })).resolves.toEqual(['hello']);
  });

  it('the same idempotency key is stored once; the timeout returns null', async () => {
    const handle = await client.start(InboxWorkflow, { count: 2, timeout: '1500ms' }, { workflowId: 'dedup' });
    await client.send('dedup', 'once', { idempotencyKey: 'k-1' });
    await client.send('dedup', 'once', { idempotencyKey: 'k-1' });
    await expect(handle.result({ timeout: '20s' })).resolves.toEqual(['once', null]);
    const [{ n }] = await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "${s.schema}".workflow_messages WHERE execution_id = $1`, [handle.executionId]);
    expect(n).toBe(1);
    // A retry of that send after the workflow finished is accepted (it was delivered); a new message is refused.
    await expect(client.send('dedup', 'once', { idempotencyKey: 'k-1' })).resolves.toBeUndefined();
    await expect(client.send('dedup', 'late')).rejects.toThrow(WorkflowFinishedError);
  });

  it('keeps the send order per topic; other topics wait for their own recv()', async () => {
    const handle = await client.start(InboxWorkflow, { count: 5, topic: 'orders' }, { workflowId: 'ordered' });
    for (let i = 0; i < 5; i++) {
      await client.send('ordered', `other-${i}`, { topic: 'noise' });
      await client.send('ordered', i, { topic: 'orders' });
    }
    await expect(handle.result({ timeout: '20s' })).resolves.toEqual([0, 1, 2, 3, 4]);
    const [{ unread }] = await sql<{ unread: number }>(
      `SELECT count(*)::int AS unread FROM "${s.schema}".workflow_messages WHERE execution_id = $1 AND consumed_position IS NULL`, [handle.executionId]);
    expect(unread).toBe(5);
  });

  it('retention removes an execution\'s messages, events and waits with it', async () => {
    const handle = await client.start(InboxWorkflow, { count: 1, timeout: '5s' }, { workflowId: 'retained' });
    await client.send('retained', 'bye');
    await client.send('retained', 'unread', { topic: 'never-read' });
    await handle.result({ timeout: '20s' });
    const count = async (table: string) =>
      (await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "${s.schema}".${table} WHERE execution_id = $1`, [handle.executionId]))[0].n;
    expect([await count('workflow_messages'), await count('workflow_events'), await count('workflow_waits')]).toEqual([2, 1, 1]);
    await sql(`UPDATE "${s.schema}".workflow_executions SET completed_at = now() - interval '31 days' WHERE id = $1`, [handle.executionId]);
    await app.get(RetentionService).cleanup();
    expect([await count('workflow_messages'), await count('workflow_events'), await count('workflow_waits')]).toEqual([0, 0, 0]);
    await expect(client.getEvent('retained', 'received')).rejects.toThrow(WorkflowNotFoundError);
  });

  it('an unknown workflow id and a bad idempotency key are refused with named errors', async () => {
    await expect(client.send('nobody', 1)).rejects.toThrow(WorkflowNotFoundError);
    await expect(client.send('nobody', 1)).rejects.toThrow(/start it before sending to it/);
    await expect(client.send('nobody', 1, { idempotencyKey: '' })).rejects.toThrow(TypeError);
  });
});

describe('send() and recv() across processes', () => {
  const s = scenario();
  let app: INestApplication;
  let client: WorkflowClient;
  const children: Child[] = [];

  beforeAll(async () => {
    ({ app, client } = await bootWorkflowApp(s, WAIT_WORKFLOWS, { workers: false }));
  });
  afterAll(async () => {
    for (const child of children) await kill(child);
    await app.close();
  });

  it('a worker SIGKILLed between two messages: each message is received once, at the same position on replay', async () => {
    const first = spawnWorker(s);
    children.push(first);
    await first.line('READY');
    const handle = await client.start(InboxWorkflow, { count: 2 }, { workflowId: 'crash-inbox' });
    await client.send('crash-inbox', 'm1');
    await waitUntil('m1 received', async () => (await sql(`SELECT 1 FROM "${s.schema}".step_runs WHERE workflow_id = 'crash-inbox' AND step = 'got-0'`)).length > 0);
    await kill(first);
    await client.send('crash-inbox', 'm2'); // no worker runs now: the message waits in Postgres
    const second = spawnWorker(s);
    children.push(second);
    await second.line('READY');
    await expect(handle.result({ timeout: '40s' })).resolves.toEqual(['m1', 'm2']);
    const received = await client.steps(handle.executionId);
    expect(received.filter((c) => c.name === '@recv').map((c) => [c.position, c.result])).toEqual([[0, { message: 'm1' }], [3, { message: 'm2' }]]);
  });

  it('50 concurrent sends from two processes (each sent twice) are all delivered exactly once', async () => {
    const worker = spawnWorker(s);
    children.push(worker);
    await worker.line('READY');
    const handle = await client.start(InboxWorkflow, { count: 50 }, { workflowId: 'fan-in' });
    const startAt = String(Date.now() + 3000);
    const senders = ['a', 'b'].map((prefix) => spawnWorker(s, { WF_MODE: 'sender', WF_ID: 'fan-in', WF_SENDS: '25', WF_KEY_PREFIX: prefix, WF_START_AT: startAt }));
    children.push(...senders);
    for (const sender of senders) await sender.line('SENT');
    const got = (await handle.result({ timeout: '50s' })) as string[];
    expect([...got].sort()).toEqual([...Array.from({ length: 25 }, (_, i) => `a-${i}`), ...Array.from({ length: 25 }, (_, i) => `b-${i}`)].sort());
    const [{ n }] = await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "${s.schema}".workflow_messages WHERE execution_id = $1`, [handle.executionId]);
    expect(n).toBe(50);
  }, 90_000);
});
