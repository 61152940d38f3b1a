import { INestApplication } from '@nestjs/common';
import { RecoveryAttemptsExhaustedError, WorkflowClient, WorkflowFailedError } from '../../lib';
import { waitUntil } from '../support/resilience';
import { sql } from '../support/test-app';
import { CrashLoopWorkflow } from './fixtures/crash.workflow';
import { OrderWorkflow } from './fixtures/order.workflow';
import { Child, kill, spawnWorker } from './processes';
import { bootWorkflowApp, scenario } from './support';

jest.setTimeout(60_000); // real processes and servers; waits are bounded by the assertions' own timeouts

// SEMANTICS §2 lines 27 and 30: a worker process killed mid-step; a workflow that keeps crashing.
describe('worker process killed with SIGKILL', () => {
  const s = scenario();
  let client: WorkflowClient;
  let app: INestApplication;
  const children: Child[] = [];

  beforeAll(async () => {
    // The test process only starts and inspects (workers off); the child processes do the work.
    ({ app, client } = await bootWorkflowApp(s, [OrderWorkflow, CrashLoopWorkflow], { workers: false }));
  });

  afterAll(async () => {
    for (const child of children) await kill(child);
    await app.close();
  });

  const runs = (workflowId: string) =>
    sql<{ step: string; phase: string; n: number }>(
      `SELECT step, phase, count(*)::int AS n FROM "${s.schema}".step_runs WHERE workflow_id = $1 GROUP BY step, phase ORDER BY step, phase`,
      [workflowId],
    );

  it('27: killed mid-step → completes after a restart; completed steps ran once, the interrupted one again', async () => {
    const first = spawnWorker(s);
    children.push(first);
    await first.line('READY');
    const handle = await client.start(OrderWorkflow, { orderId: 'kill-1', sleepMs: 1500, steps: 3 }, { workflowId: 'kill-1' });
    // Wait until step 0 is checkpointed and step 1 has started (is mid-way), then kill the worker.
    await waitUntil('step 1 started', async () => (await runs('kill-1')).some((r) => r.step === 'work-1' && r.phase === 'start'), { timeoutMs: 30_000 });
    expect((await client.steps(handle.executionId)).map((c) => c.position)).toEqual([0]);
    await kill(first);
    const second = spawnWorker(s);
    children.push(second);
    await second.line('READY');
    const result = await handle.result({ timeout: '60s' });
    expect(result.results).toHaveLength(3);
    const counts = await runs('kill-1');
    // work-0 completed before the kill: it never ran again. work-1 was interrupted: it started twice, finished once.
    expect(counts).toEqual([
      { step: 'work-0', phase: 'done', n: 1 },
      { step: 'work-0', phase: 'start', n: 1 },
      { step: 'work-1', phase: 'done', n: 1 },
      { step: 'work-1', phase: 'start', n: 2 },
      { step: 'work-2', phase: 'done', n: 1 },
      { step: 'work-2', phase: 'start', n: 1 },
    ]);
    const checkpoints = await client.steps(handle.executionId);
    expect(checkpoints.map((c) => [c.position, c.status])).toEqual([[0, 'completed'], [1, 'completed'], [2, 'completed']]);
    // One SIGKILL is one recovery attempt.
    expect((await handle.execution()).recoveryAttempts).toBe(1);
    await kill(second);
  }, 120_000);

  it('30: a workflow that crashes its worker every time ends failed after a bounded number of recoveries', async () => {
    const handle = await client.start(CrashLoopWorkflow, { id: 'loop-1' }, { workflowId: 'loop-1' });
    let restarts = 0;
    for (; restarts < 12; restarts++) {
      const status = await handle.status();
      if (status === 'failed') break;
      const child = spawnWorker(s, { WF_MAX_RECOVERIES: '2' });
      children.push(child);
      // It either crashes in the step (SIGKILL) or finds the execution already failed and idles.
      const outcome = await Promise.race([child.exited.then(() => 'crashed'), waitUntil('failed', async () => (await handle.status()) === 'failed', { timeoutMs: 30_000 })]);
      await kill(child);
      if (outcome !== 'crashed') break;
    }
    expect(await handle.status()).toBe('failed');
    const execution = (await client.list({ workflow: CrashLoopWorkflow })).find((e) => e.executionId === handle.executionId)!;
    expect(execution.error?.name).toBe('RecoveryAttemptsExhaustedError');
    // The stored failure comes back from result() as its own class (a WorkflowFailedError) with its code.
    const thrown = await handle.result().catch((err: unknown) => err);
    expect(thrown).toBeInstanceOf(RecoveryAttemptsExhaustedError);
    expect(thrown).toBeInstanceOf(WorkflowFailedError);
    expect((thrown as RecoveryAttemptsExhaustedError).code).toBe('RECOVERY_ATTEMPTS_EXHAUSTED');
    expect(execution.recoveryAttempts).toBeGreaterThan(2);
    const starts = await runs('loop-1');
    // Bounded: the step ran at most maxRecoveryAttempts + 1 times (+1 for BullMQ's own stalled retry).
    expect(starts[0].n).toBeLessThanOrEqual(4);
    expect(restarts).toBeLessThan(12);
  }, 150_000);
});
