import { INestApplication } from '@nestjs/common';
import { Step, Workflow, WorkflowClient } from '../../lib';
import { uuidv7 } from '../../lib/workflow/uuidv7';
import { WorkflowQueues } from '../../lib/workflow/workflow-queues';
import { WorkflowStore } from '../../lib/workflow/storage/workflow.store';
import { reconcilerLeaseMs, WorkflowReconciler } from '../../lib/workflow/workflow.reconciler';
import { waitUntil } from '../support/resilience';
import { sql } from '../support/test-app';
import { bootWorkflowApp, scenario } from './support';

jest.setTimeout(120_000);

@Workflow({ name: 'slowpoke' })
class SlowpokeWorkflow {
  async run(input: { n: number }): Promise<number> {
    return this.one(input.n);
  }

  @Step()
  one(n: number): Promise<number> {
    return Promise.resolve(n);
  }
}

// SEMANTICS §2 lines 28 and 30: nothing stays pending forever, however many live executions there are.
describe('reconciler', () => {
  const s = scenario();
  let app: INestApplication;
  let client: WorkflowClient;
  const executions = `"${s.schema}".workflow_executions`;

  beforeAll(async () => {
    // Passes run only when the test calls reconcile().
    ({ app, client } = await bootWorkflowApp(s, [SlowpokeWorkflow], { recoveryInterval: '1h' }));
  }, 60_000);
  afterAll(async () => {
    await app.get(WorkflowQueues).queue('workflows').obliterate({ force: true }).catch(() => undefined);
    await app.close();
  });

  it('re-enqueues an execution that lost its job even behind 600 long-running ones with live jobs', async () => {
    const queue = app.get(WorkflowQueues).queue('workflows');
    const live = Array.from({ length: 600 }, () => uuidv7());
    await sql(
      `INSERT INTO ${executions} (id, workflow_id, workflow_name, status, input, input_hash, updated_at)
       SELECT id, 'live-' || ord, 'slowpoke', 'running', '{}', 'h', now() - interval '3 hours'
         FROM unnest($1::uuid[]) WITH ORDINALITY AS t(id, ord)`,
      [live],
    );
    await queue.addBulk(live.map((id) => ({ name: 'slowpoke', data: { executionId: id }, opts: { jobId: `wf-${id}`, delay: 3_600_000 } })));
    const lost = uuidv7();
    await sql(
      `INSERT INTO ${executions} (id, workflow_id, workflow_name, status, input, input_hash, updated_at)
       VALUES ($1, 'lost-1', 'slowpoke', 'pending', '{"n":1}', 'h', now() - interval '2 hours')`,
      [lost],
    );
    expect(await app.get(WorkflowReconciler).reconcile()).toBe(1);
    const handle = await client.getHandle<number>('lost-1');
    expect(await handle.result({ timeout: '20s' })).toBe(1);
  });
});

// An instance killed during a pass leaves the reconciler's lock row behind: it must lapse after about two intervals
// (at least 10 s), not a fixed minute, or lost executions wait that long for any other instance to recover them.
describe('reconciler lock of a pass', () => {
  const s = scenario();
  let app: INestApplication;

  beforeAll(async () => {
    ({ app } = await bootWorkflowApp(s, [SlowpokeWorkflow], { recoveryInterval: '500ms' }));
  }, 60_000);
  afterAll(async () => {
    await app.get(WorkflowQueues).queue('workflows').obliterate({ force: true }).catch(() => undefined);
    await app.close();
  });

  it('is leased for reconcilerLeaseMs(recoveryInterval): what a holder killed mid-pass leaves behind', async () => {
    const store = app.get(WorkflowStore);
    const leases: number[] = [];
    const timeOutExpired = store.timeOutExpired.bind(store);
    // The first thing a pass does under the lock: read what the lock row grants this holder at that moment.
    jest.spyOn(store, 'timeOutExpired').mockImplementation(async () => {
      const rows = await sql<{ ms: number }>(
        `SELECT (extract(epoch FROM locked_until - now()) * 1000)::float8 AS ms FROM "${s.schema}".idempotency_locks WHERE name LIKE '%workflow-reconciler%'`,
      );
      leases.push(rows[0].ms);
      return timeOutExpired();
    });
    await waitUntil('a reconciler pass', () => leases.length > 0, { timeoutMs: 20_000 });
    expect(reconcilerLeaseMs(500)).toBe(10_000);
    expect(leases[0]).toBeGreaterThan(8_000);
    expect(leases[0]).toBeLessThanOrEqual(10_000);
  });
});
