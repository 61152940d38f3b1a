import { INestApplication } from '@nestjs/common';
import { RetentionService, Step, Workflow, WorkflowClient } from '../../lib';
import { sql } from '../support/test-app';
import { bootWorkflowApp, scenario } from '../workflow/support';

@Workflow({ name: 'kept', retention: '1h' })
class KeptWorkflow {
  async run(input: { n: number }): Promise<number> {
    return this.double(input.n);
  }

  @Step()
  double(n: number): Promise<number> {
    return Promise.resolve(n * 2);
  }
}

@Workflow({ name: 'ephemeral', queue: 'ephemeral' })
class EphemeralWorkflow {
  async run(input: { n: number }): Promise<number> {
    return this.triple(input.n);
  }

  @Step()
  triple(n: number): Promise<number> {
    return Promise.resolve(n * 3);
  }
}

@Workflow({ name: 'defaulted' })
class DefaultedWorkflow {
  async run(input: { n: number }): Promise<number> {
    return this.inc(input.n);
  }

  @Step()
  inc(n: number): Promise<number> {
    return Promise.resolve(n + 1);
  }
}

describe('retention of workflow executions', () => {
  const s = scenario();
  let app: INestApplication;
  let client: WorkflowClient;
  const executions = `"${s.schema}".workflow_executions`;
  const steps = `"${s.schema}".workflow_steps`;

  beforeAll(async () => {
    ({ app, client } = await bootWorkflowApp(s, [KeptWorkflow, EphemeralWorkflow, DefaultedWorkflow], {}, {
      retention: { workflows: '2h', queues: { ephemeral: '0' }, cleanupInterval: false },
    }));
  }, 60_000);
  afterAll(() => app.close());

  const age = (workflowId: string, interval: string) =>
    sql(`UPDATE ${executions} SET completed_at = now() - interval '${interval}' WHERE workflow_id = $1`, [workflowId]);

  it('"0" on the queue removes an execution as soon as it finishes, and its id can be used again', async () => {
    const handle = await client.start(EphemeralWorkflow, { n: 2 }, { workflowId: 'eph-1' });
    await waitForCount(`SELECT 1 FROM ${executions} WHERE workflow_id = 'eph-1'`, 0);
    expect(handle.workflowId).toBe('eph-1');
    const again = await client.start(EphemeralWorkflow, { n: 2 }, { workflowId: 'eph-1' });
    expect(again.executionId).not.toBe(handle.executionId);
  });

  it('keeps each workflow for its own retention, else retention.workflows, and never removes live executions', async () => {
    const kept = await client.start(KeptWorkflow, { n: 1 }, { workflowId: 'kept-1' });
    const dflt = await client.start(DefaultedWorkflow, { n: 1 }, { workflowId: 'default-1' });
    expect(await kept.result({ timeout: 20_000 })).toBe(2);
    expect(await dflt.result({ timeout: 20_000 })).toBe(2);
    await age('kept-1', '90 minutes'); // older than 1h (its own), younger than 2h (the module default)
    await age('default-1', '90 minutes');
    await sql(`INSERT INTO ${executions} (id, workflow_id, workflow_name, status, input_hash, updated_at)
               VALUES (gen_random_uuid(), 'live-1', 'kept', 'running', 'h', now() - interval '10 days')`);
    const report = await app.get(RetentionService).cleanup();
    expect(report?.workflows).toBe(1);
    const left = (await sql<{ workflow_id: string }>(`SELECT workflow_id FROM ${executions} ORDER BY workflow_id`)).map((r) => r.workflow_id);
    expect(left).toEqual(['default-1', 'live-1']);
    expect(await sql(`SELECT 1 FROM ${steps} WHERE execution_id = $1`, [kept.executionId])).toEqual([]);
    await sql(`DELETE FROM ${executions} WHERE workflow_id = 'live-1'`);
  });

  it('lets a workflow id be used again after cleanup removed its execution', async () => {
    const first = await client.start(DefaultedWorkflow, { n: 5 }, { workflowId: 'reuse-wf' });
    expect(await first.result({ timeout: 20_000 })).toBe(6);
    const duplicate = await client.start(DefaultedWorkflow, { n: 5 }, { workflowId: 'reuse-wf' });
    expect(duplicate.executionId).toBe(first.executionId);
    await age('reuse-wf', '3 hours');
    await app.get(RetentionService).cleanup();
    const fresh = await client.start(DefaultedWorkflow, { n: 5 }, { workflowId: 'reuse-wf' });
    expect(fresh.executionId).not.toBe(first.executionId);
    expect(await fresh.result({ timeout: 20_000 })).toBe(6);
  });
});

async function waitForCount(query: string, count: number): Promise<void> {
  const deadline = Date.now() + 20_000;
  while ((await sql(query)).length !== count) {
    if (Date.now() > deadline) throw new Error(`expected ${count} rows for: ${query}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
