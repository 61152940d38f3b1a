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

  // A trigger on the test's own run log: while it exists, the process `pid` cannot record step work-1 as done.
  const holdWork1 = async (workflowId: string, pid: number) => {
    await sql(`CREATE OR REPLACE FUNCTION "${s.schema}".hold_work_1() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.workflow_id = '${workflowId}' AND NEW.step = 'work-1' AND NEW.phase = 'done' AND NEW.pid = ${pid} THEN
          RAISE EXCEPTION 'work-1 is held by the test';
        END IF;
        RETURN NEW;
      END $$`);
    await sql(`DROP TRIGGER IF EXISTS hold_work_1 ON "${s.schema}".step_runs`);
    await sql(`CREATE TRIGGER hold_work_1 BEFORE INSERT ON "${s.schema}".step_runs FOR EACH ROW EXECUTE FUNCTION "${s.schema}".hold_work_1()`);
  };
  const releaseWork1 = async () => {
    await sql(`DROP TRIGGER hold_work_1 ON "${s.schema}".step_runs`);
    await sql(`DROP FUNCTION "${s.schema}".hold_work_1()`);
  };

  it('27: killed mid-step → completes after a restart; completed steps ran once, the interrupted one again', async () => {
    const first = spawnWorker(s);
    children.push(first);
    await first.line('READY');
    // Holds step 1 mid-way in the first worker: its body cannot record 'done' (the run log refuses the row, and the
    // fixture's RunLog.record keeps retrying) until the hold is lifted — so the kill surely lands mid-step.
    await holdWork1('kill-1', first.proc.pid!);
    const handle = await client.start(OrderWorkflow, { orderId: 'kill-1', sleepMs: 200, steps: 3 }, { workflowId: 'kill-1' });
    // Wait until step 0 is checkpointed and step 1 has started (is mid-way), then kill the worker.
    await waitUntil('step 1 started', async () => (await runs('kill-1')).some((r) => r.step === 'work-1' && r.phase === 'start'), { timeoutMs: 30_000 });
    expect((await client.steps(handle.executionId)).map((c) => c.position)).toEqual([0]);
    await kill(first);
    await releaseWork1();
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
    // Bounded: each run of the workflow (the first and its 2 recoveries) adds the step's job at most once, and BullMQ
    // restarts a job that stalled at most once (a step worker's maxStalledCount is 1) — possibly before the workflow's
    // next run counts a recovery, depending on which of the two stalled jobs a new worker picks up first.
    expect(starts[0].n).toBeLessThanOrEqual(2 * (2 + 1));
    expect(restarts).toBeLessThan(12);
  }, 150_000);
});
