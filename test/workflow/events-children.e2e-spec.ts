import { INestApplication } from '@nestjs/common';
import { ChildWorkflowFailedError, WorkflowClient, WorkflowNotFoundError } from '../../lib';
import { waitUntil } from '../support/resilience';
import { sql } from '../support/test-app';
import { InboxWorkflow, ParentWorkflow, WAIT_WORKFLOWS } from './fixtures/waits.workflows';
import { Child, kill, spawnWorker } from './processes';
import { bootWorkflowApp, scenario } from './support';

jest.setTimeout(60_000); // real processes and servers; waits are bounded by the assertions' own timeouts

// Issue 11: setEvent()/getEvent() and child workflows; the workflows run in a worker process, the test reads from another.
describe('events and child workflows (worker in another process)', () => {
  const s = scenario();
  let app: INestApplication;
  let client: WorkflowClient;
  const children: Child[] = [];

  beforeAll(async () => {
    ({ app, client } = await bootWorkflowApp(s, WAIT_WORKFLOWS, { workers: false }));
    const worker = spawnWorker(s);
    children.push(worker);
    await worker.line('READY');
  });
  afterAll(async () => {
    for (const child of children) await kill(child);
    await app.close();
  });

  it('getEvent() waiting in this process gets the value once the workflow sets it; a later setEvent replaces it', async () => {
    const handle = await client.start(InboxWorkflow, { count: 2 }, { workflowId: 'events' });
    await expect(client.getEvent('events', 'received')).resolves.toBeNull(); // not set yet, no wait
    const first = client.getEvent<number>('events', 'received', { timeout: '30s' });
    await client.send('events', 'a');
    await expect(first).resolves.toBe(1);
    await client.send('events', 'b');
    await handle.result({ timeout: '20s' });
    await expect(client.getEvent('events', 'received')).resolves.toBe(2);
    await expect(client.getEvent('events', 'never-set', { timeout: '5s' })).resolves.toBeNull(); // finished: no wait
    await expect(client.getEvent('nobody', 'received')).rejects.toThrow(WorkflowNotFoundError);
  });

  it('getEvent() times out with null', async () => {
    await client.start(InboxWorkflow, { count: 1 }, { workflowId: 'silent' });
    await expect(client.getEvent('silent', 'received', { timeout: '300ms' })).resolves.toBeNull();
    await client.cancel('silent');
  });

  it('runChild(): the child is linked to its parent (list, inspection) and its result returns to the parent', async () => {
    const handle = await client.start(ParentWorkflow, { child: {} }, { workflowId: 'parent-ok' });
    await expect(handle.result({ timeout: '20s' })).resolves.toEqual({ ok: 'shipped' });
    const kids = await client.list({ parentExecutionId: handle.executionId });
    expect(kids.map((k) => [k.workflowName, k.status, k.parentExecutionId, k.workflowId])).toEqual([
      ['child', 'completed', handle.executionId, `${handle.executionId}-1`],
    ]);
    expect((await client.steps(handle.executionId)).map((c) => c.name)).toEqual(['mark', '@startChild', '@childResult']);
  });

  it('a child that fails surfaces in the parent as ChildWorkflowFailedError, which the parent can catch', async () => {
    const handle = await client.start(ParentWorkflow, { child: { fail: true } }, { workflowId: 'parent-fail' });
    await expect(handle.result({ timeout: '20s' })).resolves.toEqual({ caught: 'ChildWorkflowFailedError', code: 'CHILD_WORKFLOW_FAILED', status: 'failed' });
    expect(new ChildWorkflowFailedError('w', 'e', 'failed', { name: 'Error', message: 'x' }).code).toBe('CHILD_WORKFLOW_FAILED');
  });

  it('cancelling a parent cancels its unfinished children', async () => {
    const handle = await client.start(ParentWorkflow, { child: { ms: 30_000 } }, { workflowId: 'parent-cancel' });
    const child = await waitUntil('the child runs', async () => (await client.list({ parentExecutionId: handle.executionId }))[0]);
    await client.cancel('parent-cancel');
    expect((await client.getHandle(child.workflowId).then((h) => h.status()))).toBe('cancelled');
    expect(await handle.status()).toBe('cancelled');
  });

  it('parent worker SIGKILLed after starting a child → after a restart exactly one child, and the parent completes', async () => {
    const handle = await client.start(ParentWorkflow, { child: { ms: 1500 }, detach: true }, { workflowId: 'parent-crash' });
    await waitUntil('the child is started', async () => (await client.list({ parentExecutionId: handle.executionId })).length > 0);
    await kill(children[0]);
    const restarted = spawnWorker(s);
    children.push(restarted);
    await restarted.line('READY');
    await expect(handle.result({ timeout: '40s' })).resolves.toBe('shipped');
    const [{ n }] = await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "${s.schema}".workflow_executions WHERE parent_execution_id = $1`, [handle.executionId]);
    expect(n).toBe(1);
    const [{ runs }] = await sql<{ runs: number }>(
      `SELECT count(*)::int AS runs FROM "${s.schema}".step_runs WHERE workflow_id = $1 AND step = 'child-work'`, [`${handle.executionId}-1`]);
    expect(runs).toBe(1);
  });
});
