import { INestApplication } from '@nestjs/common';
import { NotInWorkflowError, sleep, WorkflowClient } from '../../lib';
import { waitUntil } from '../support/resilience';
import { sql } from '../support/test-app';
import { MisuseWorkflow, QuickWorkflow, SleepyWorkflow, WAIT_WORKFLOWS } from './fixtures/waits.workflows';
import { bootWorkflowApp, scenario } from './support';

jest.setTimeout(60_000);

// Issue 11: durable sleep in one process — wakes at its time, holds no worker slot, misuse is refused.
describe('sleep()', () => {
  const s = scenario();
  let app: INestApplication;
  let client: WorkflowClient;

  beforeAll(async () => {
    ({ app, client } = await bootWorkflowApp(s, WAIT_WORKFLOWS, { workflowConcurrency: 1, concurrency: 1 }));
  });
  afterAll(async () => {
    await app.close();
  });

  it('wakes at the checkpointed time; the wait is recorded at its journal position', async () => {
    const handle = await client.start(SleepyWorkflow, { ms: 1000 }, { workflowId: 'sleep-1' });
    const { before, after } = await handle.result({ timeout: '30s' });
    expect(after - before).toBeGreaterThanOrEqual(1000);
    expect((await client.steps(handle.executionId)).map((c) => [c.position, c.name])).toEqual([[0, 'stamp'], [1, '@sleep'], [2, 'stamp']]);
    const [wait] = await sql<{ kind: string; wake_at: Date }>(`SELECT kind, wake_at FROM "${s.schema}".workflow_waits WHERE execution_id = $1`, [handle.executionId]);
    expect(wait.kind).toBe('sleep');
    expect(after).toBeGreaterThanOrEqual(wait.wake_at.getTime());
  });

  it('holds no worker slot: sleeping workflows (workflow concurrency 1) do not block another workflow', async () => {
    const sleepers = [];
    for (let i = 0; i < 5; i++) sleepers.push(await client.start(SleepyWorkflow, { ms: 20_000 }, { workflowId: `long-sleep-${i}` }));
    await waitUntil('all sleepers suspended', async () => {
      const rows = await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "${s.schema}".workflow_executions WHERE workflow_id LIKE 'long-sleep-%' AND suspended_until IS NOT NULL AND status = 'pending'`);
      return rows[0].n === 5 || undefined;
    });
    const quick = await client.start(QuickWorkflow, { id: 'q' }, { workflowId: 'quick-1' });
    await expect(quick.result({ timeout: '10s' })).resolves.toBe('q');
    for (const h of sleepers) await expect(h.status()).resolves.toBe('pending');
    for (let i = 0; i < 5; i++) await client.cancel(`long-sleep-${i}`);
  });

  it('is refused outside a workflow and inside a step, with a message that says where to call it', async () => {
    await expect(sleep(10)).rejects.toThrow(NotInWorkflowError);
    await expect(sleep(10)).rejects.toThrow(/call it in run\(\) of a @Workflow\(\) class/);
    for (const call of ['sleep', 'recv', 'setEvent', 'startChild'] as const) {
      const handle = await client.start(MisuseWorkflow, { call }, { workflowId: `misuse-${call}` });
      await expect(handle.result({ timeout: '10s' })).resolves.toMatch(/^NotInWorkflowError: .* was called inside a @Step\(\) method: call it in the workflow's run\(\)/);
    }
  });
});
