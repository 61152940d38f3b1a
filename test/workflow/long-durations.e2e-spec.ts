import { INestApplication } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { RetentionService, Step, Workflow, WorkflowClient, WorkflowStore } from '../../lib';
import { WorkflowReconciler } from '../../lib/workflow/workflow.reconciler';
import { sql } from '../support/test-app';
import { bootWorkflowApp, scenario } from './support';

jest.setTimeout(60_000); // real servers; waits are bounded by the assertions' own timeouts

const DAY = 86_400_000;

@Workflow({ name: 'long-deadline', timeout: '25d' })
class LongDeadlineWorkflow {
  async run(input: { id: string }): Promise<string> {
    return this.slow(input.id);
  }

  @Step()
  async slow(id: string): Promise<string> {
    await sleep(200);
    return `deadline:${id}`;
  }
}

@Workflow({ name: 'long-step-timeout' })
class LongStepTimeoutWorkflow {
  async run(input: { id: string }): Promise<string[]> {
    return [await this.slow(input.id), await this.slow(`${input.id}-again`)];
  }

  @Step({ timeout: '25d' })
  async slow(id: string): Promise<string> {
    await sleep(200);
    return `step:${id}`;
  }
}

// Issue 16 item 3: every duration the parser accepts works at 25 days (beyond Node's 2^31-1 ms timer limit).
describe('durations of 25 days', () => {
  const s = scenario();
  let app: INestApplication;
  let client: WorkflowClient;

  beforeAll(async () => {
    ({ app, client } = await bootWorkflowApp(
      s,
      [LongDeadlineWorkflow, LongStepTimeoutWorkflow],
      { recoveryInterval: '25d', pollInterval: '25d' },
      { retention: { cleanupInterval: '25d', default: '365250d', workflows: '365250d', inbox: '365250d' } },
    ));
  });

  afterAll(async () => {
    await app?.close();
  });

  it('@Workflow({ timeout: "25d" }): start() works, the deadline is 25 days ahead, and the workflow completes', async () => {
    const handle = await client.start(LongDeadlineWorkflow, { id: 'a' }, { workflowId: 'long-deadline-a' });
    expect(await handle.result({ timeout: '30s' })).toBe('deadline:a');
    const [row] = await sql<{ ahead_ms: string }>(
      `SELECT (extract(epoch FROM deadline_at - created_at) * 1000)::bigint::text AS ahead_ms FROM "${s.schema}".workflow_executions WHERE id = $1`,
      [handle.executionId],
    );
    expect(Number(row.ahead_ms)).toBe(25 * DAY);
  });

  it('@Step({ timeout: "25d" }): attempts are not cut short by an overflowing timer', async () => {
    const handle = await client.start(LongStepTimeoutWorkflow, { id: 'b' }, { workflowId: 'long-step-b' });
    expect(await handle.result({ timeout: '30s' })).toEqual(['step:b', 'step:b-again']);
    expect((await client.steps(handle.executionId)).map((c) => [c.status, c.attempts])).toEqual([['completed', 1], ['completed', 1]]);
  });

  it('pollInterval, recoveryInterval and retention.cleanupInterval of 25d do not fire while a workflow runs', async () => {
    const store = app.get(WorkflowStore);
    const reconciler = app.get(WorkflowReconciler);
    const retention = app.get(RetentionService);
    const stepStates = jest.spyOn(store, 'stepState');
    const passes = jest.spyOn(reconciler, 'reconcile');
    const cleanups = jest.spyOn(retention, 'cleanup');
    const handle = await client.start(LongStepTimeoutWorkflow, { id: 'c' }, { workflowId: 'long-poll-c' });
    expect(await handle.result({ timeout: '30s' })).toEqual(['step:c', 'step:c-again']);
    // Woken by the step's completion, not by polling: one Postgres check per step by the step worker, at most
    // one more by the waiting workflow (an overflowing 1 ms poll makes hundreds in the 400 ms the steps take).
    expect(stepStates.mock.calls.length).toBeLessThanOrEqual(4);
    expect(passes).not.toHaveBeenCalled();
    expect(cleanups).not.toHaveBeenCalled();
  });

  it('the reconciler scan for executions idle longer than 25d runs without an integer overflow', async () => {
    await expect(app.get(WorkflowStore).unfinished(25 * DAY, 10)).resolves.toEqual([]);
    await expect(app.get(WorkflowReconciler).reconcile()).resolves.toBe(0);
  });

  it('retention of the longest duration accepted (1000 years) runs its cleanup SQL without leaving the timestamp range', async () => {
    await expect(app.get(RetentionService).cleanup()).resolves.toEqual({ records: 0, inbox: 0, workflows: 0 });
  });
});
