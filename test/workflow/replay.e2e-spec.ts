import { INestApplication } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { currentStep, DeterminismError, Step, Workflow, WorkflowClient, WorkflowFailedError } from '../../lib';
import { waitUntil } from '../support/resilience';
import { sql } from '../support/test-app';
import { expectOwnKeys } from './branch-keys';
import { BranchesWorkflow, BranchProbe } from './fixtures/branches.workflow';
import { bootWorkflowApp, scenario } from './support';

jest.setTimeout(60_000); // real processes and servers; waits are bounded by the assertions' own timeouts

const s = scenario();

/** Workflow ids whose steps fail (cleared by the test before resume), and every step body run, as `<id>:<step>`. */
const failing = new Set<string>();
const ran: string[] = [];
const runsOf = (id: string, step: string) => ran.filter((r) => r === `${id}:${step}`).length;

/** Waits until `query` (with `{schema}`, and the running step's execution id as $1) returns a row. */
async function waitForRow(query: string): Promise<void> {
  const check = query.replaceAll('{schema}', `"${s.schema}"`);
  const { executionId } = currentStep();
  await waitUntil(check, async () => (await sql(check, [executionId])).length > 0, { timeoutMs: 30_000 });
}

/** Steps for the parallel-failure workflows: each fails while its workflow id is failing, once `waitFor` holds. */
abstract class FailingSteps {
  protected async body(step: string, waitFor?: string): Promise<string> {
    const { workflowId } = currentStep();
    ran.push(`${workflowId}:${step}`);
    if (!failing.has(workflowId)) return `${step}-ok`;
    if (waitFor) await waitForRow(waitFor);
    throw new Error(`${step} failed`);
  }
}

/** Issue 16 item 2: `Promise.all([slowFlaky(), fastFails().catch(() => 'fallback')])`. */
@Workflow({ name: 'caught-beside-uncaught' })
class CaughtBesideUncaughtWorkflow extends FailingSteps {
  async run(_input: { n: number }): Promise<string[]> {
    return Promise.all([this.slowFlaky(), this.fastFails().catch(() => 'fallback')]);
  }

  @Step()
  slowFlaky(): Promise<string> {
    return this.body('slowFlaky', `SELECT 1 FROM {schema}.workflow_steps WHERE execution_id = $1 AND name = 'fastFails'`);
  }

  @Step()
  fastFails(): Promise<string> {
    return this.body('fastFails');
  }
}

/** Under `Promise.allSettled` both fail; the workflow rethrows only the first one's error. */
@Workflow({ name: 'settled' })
class SettledWorkflow extends FailingSteps {
  async run(_input: { n: number }): Promise<string> {
    const [a, b] = await Promise.allSettled([this.first(), this.second()]);
    if (a.status === 'rejected') throw a.reason;
    return `${a.value}/${b.status}`;
  }

  @Step()
  first(): Promise<string> {
    return this.body('first');
  }

  @Step()
  second(): Promise<string> {
    return this.body('second');
  }
}

/** `fastFails` ends the run; `slowFails` fails only after the execution is failed: the run never received it. */
@Workflow({ name: 'failed-after-end' })
class FailedAfterEndWorkflow extends FailingSteps {
  async run(_input: { n: number }): Promise<string[]> {
    return Promise.all([this.fastFails(), this.slowFails()]);
  }

  @Step()
  fastFails(): Promise<string> {
    return this.body('fastFails');
  }

  @Step()
  slowFails(): Promise<string> {
    return this.body('slowFails', `SELECT 1 FROM {schema}.workflow_executions WHERE id = $1 AND status = 'failed'`);
  }
}

/** The amount passed to `charge` comes from outside the workflow's input: not deterministic. */
const rate = { value: 2 };

@Workflow({ name: 'drifting' })
class DriftingWorkflow {
  async run(input: { amount: number }): Promise<number> {
    const charged = await this.charge(input.amount * rate.value);
    await this.gate();
    return charged;
  }

  @Step()
  charge(amount: number): Promise<number> {
    ran.push(`${currentStep().workflowId}:charge`);
    return Promise.resolve(amount);
  }

  @Step()
  gate(): Promise<void> {
    const { workflowId } = currentStep();
    return failing.has(workflowId) ? Promise.reject(new Error('gate closed')) : Promise.resolve();
  }
}

/** Refactored between runs: the first run awaits both steps in parallel, the replay one after the other. */
const shape = { sequential: false };

@Workflow({ name: 'refactored' })
class RefactoredWorkflow extends FailingSteps {
  async run(_input: { n: number }): Promise<string[]> {
    const both = shape.sequential ? [await this.slow(), await this.quick()] : await Promise.all([this.slow(), this.quick()]);
    await this.last();
    return both;
  }

  @Step()
  async slow(): Promise<string> {
    await waitForRow(`SELECT 1 FROM {schema}.workflow_steps WHERE execution_id = $1 AND name = 'quick'`);
    return 'slow-ok';
  }

  @Step()
  quick(): Promise<string> {
    return Promise.resolve('quick-ok');
  }

  @Step()
  last(): Promise<string> {
    return this.body('last');
  }
}

describe('replay after resume: recorded order, argument hashes, and which failures resume re-runs', () => {
  let app: INestApplication;
  let client: WorkflowClient;

  beforeAll(async () => {
    ({ app, client } = await bootWorkflowApp(s, [
      BranchesWorkflow, BranchProbe, CaughtBesideUncaughtWorkflow, SettledWorkflow, FailedAfterEndWorkflow, DriftingWorkflow, RefactoredWorkflow,
    ]));
  });
  afterAll(async () => {
    await app.close();
  });

  const newId = (prefix: string) => `${prefix}-${randomUUID().slice(0, 6)}`;
  const statuses = async (executionId: string) => (await client.steps(executionId)).map((c) => `${c.name}:${c.status}`);

  /** Starts a workflow (by name) whose steps fail while its id is in `failing`, and waits until it has failed with `error`. */
  async function startFailing(workflow: string, input: object, error: RegExp) {
    const id = newId(workflow);
    failing.add(id);
    const handle = await client.start(workflow, input as never, { workflowId: id });
    await expect(handle.result({ timeout: '30s' })).rejects.toThrow(error);
    return { id, handle };
  }

  it('issue 16.1: after resume, parallel branches replay their own results, whatever order the first run completed in', async () => {
    const items = ['x0', 'x1', 'x2'];
    const id = newId('branches');
    const handle = await client.start(BranchesWorkflow, { items, settleFailsOnce: true }, { workflowId: id });
    await expect(handle.result({ timeout: '30s' })).rejects.toThrow(/settle fails the first time/);
    const resumed = await client.resume<string[]>(id);
    expect(await resumed.result({ timeout: '30s' })).toEqual(['B(A(x0))', 'B(A(x1))', 'B(A(x2))']);
    const steps = await client.steps(handle.executionId);
    // The first run completed prepare in reverse order, so it called finish for x2 first.
    expect(steps.filter((c) => c.name === 'finish').map((c) => c.result)).toEqual(['B(A(x2))', 'B(A(x1))', 'B(A(x0))']);
    expect(steps.map((c) => c.sequence).sort((a, b) => a - b)).toEqual(steps.map((_, i) => i));
    await expectOwnKeys(s.schema, id, handle.executionId, items, steps);
  });

  it('issue 16.1: a step called with other arguments than recorded fails with DeterminismError naming both, never the stored result', async () => {
    const { id, handle } = await startFailing('drifting', { amount: 10 }, /gate closed/);
    failing.delete(id);
    rate.value = 3; // the replayed call is charge(30) where charge(20) is recorded
    try {
      const err = await (await client.resume(id)).result({ timeout: '30s' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(WorkflowFailedError);
      const stored = (err as WorkflowFailedError).error;
      expect(stored.name).toBe(DeterminismError.name);
      const [charge] = await client.steps(handle.executionId);
      expect(stored.message).toContain(`step #0 ("charge") was recorded with arguments ${charge.argsHash}`);
      expect(stored.message).toMatch(/now calls it with arguments [0-9a-f]{32}/);
      expect(runsOf(id, 'charge')).toBe(1);
    } finally {
      rate.value = 2;
    }
  });

  it('issue 16.2: resume re-runs the uncaught failure among parallel steps and keeps the caught one', async () => {
    const { id, handle } = await startFailing('caught-beside-uncaught', { n: 1 }, /slowFlaky failed/);
    expect(await statuses(handle.executionId)).toEqual(['slowFlaky:failed', 'fastFails:failed']);
    failing.delete(id);
    const resumed = await client.resume<string[]>(id);
    expect(await resumed.result({ timeout: '30s' })).toEqual(['slowFlaky-ok', 'fallback']);
    expect(runsOf(id, 'slowFlaky')).toBe(2);
    expect(runsOf(id, 'fastFails')).toBe(1);
    expect(await statuses(handle.executionId)).toEqual(['slowFlaky:completed', 'fastFails:failed']);
  });

  it('issue 16.2: under Promise.allSettled, resume re-runs the failure the workflow rethrew and keeps the one it only settled', async () => {
    const { id } = await startFailing('settled', { n: 1 }, /first failed/);
    failing.delete(id);
    const resumed = await client.resume<string>(id);
    expect(await resumed.result({ timeout: '30s' })).toBe('first-ok/rejected');
    expect(runsOf(id, 'first')).toBe(2);
    expect(runsOf(id, 'second')).toBe(1);
  });

  it('issue 16.2: a failure recorded after the run ended (never received) is re-run with the one that ended it', async () => {
    const { id, handle } = await startFailing('failed-after-end', { n: 1 }, /fastFails failed/);
    await waitUntil('slowFails checkpointed', async () => (await client.steps(handle.executionId)).length === 2, { timeoutMs: 30_000 });
    failing.delete(id);
    const resumed = await client.resume<string[]>(id);
    expect(await resumed.result({ timeout: '30s' })).toEqual(['fastFails-ok', 'slowFails-ok']);
    expect(runsOf(id, 'fastFails')).toBe(2);
    expect(runsOf(id, 'slowFails')).toBe(2);
  });

  it('a replay whose code does not call a recorded step when its outcome is due fails with DeterminismError instead of hanging', async () => {
    // First run: quick (position 1) is recorded before slow (position 0). The replay awaits slow first.
    const { id, handle } = await startFailing('refactored', { n: 1 }, /last failed/);
    failing.delete(id);
    shape.sequential = true;
    try {
      const err = await (await client.resume(id)).result({ timeout: '30s' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(WorkflowFailedError);
      expect((err as WorkflowFailedError).error).toMatchObject({
        name: DeterminismError.name,
        message: expect.stringContaining(`execution ${handle.executionId}: the outcome of step #1 ("quick") was due next, but the code did not call that step`),
      });
    } finally {
      shape.sequential = false;
    }
  });
});
