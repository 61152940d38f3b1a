import { randomUUID } from 'node:crypto';
import type { WorkflowExecution } from '../../lib';
import { waitUntil } from '../support/resilience';
import { bootForSuite, IMPLEMENTATIONS } from './implementations';

/** A new execution of a fresh workflow id (ids are UUIDs, as the client makes them). */
function newExecution(workflowId = `wf-${randomUUID()}`, extra: { input?: unknown; timeoutMs?: number } = {}) {
  return { executionId: randomUUID(), workflowId, workflowName: 'contract', input: extra.input ?? { n: 1 }, inputHash: 'hash-1', timeoutMs: extra.timeoutMs };
}

const FAILURE = { name: 'Error', message: 'step failed' };

describe.each(IMPLEMENTATIONS)('WorkflowStore contract: $name', (implementation) => {
  const s = bootForSuite(implementation);

  it('start dedup: a live or completed execution holds its workflow id; a failed one frees it', async () => {
    const a = newExecution();
    const first = await s.workflows.insert(a);
    expect(first).toMatchObject({ inserted: true, execution: { executionId: a.executionId, status: 'pending', inputHash: 'hash-1', recoveryAttempts: 0 } });

    const dup = await s.workflows.insert(newExecution(a.workflowId));
    expect(dup).toMatchObject({ inserted: false, execution: { executionId: a.executionId, status: 'pending' } });

    await s.workflows.begin(a.executionId, 10);
    await expect(s.workflows.finish(a.executionId, 'failed', { error: FAILURE })).resolves.toBe(true);
    const b = newExecution(a.workflowId);
    expect(await s.workflows.insert(b)).toMatchObject({ inserted: true, execution: { executionId: b.executionId } });

    await s.workflows.begin(b.executionId, 10);
    await s.workflows.finish(b.executionId, 'completed', { result: { done: true } });
    expect(await s.workflows.insert(newExecution(a.workflowId))).toMatchObject({
      inserted: false,
      execution: { executionId: b.executionId, status: 'completed', result: { done: true } },
    });
    expect((await s.workflows.latest(a.workflowId))?.executionId).toBe(b.executionId);
  });

  it('begin: marks the execution running with its checkpoints; a second begin counts a recovery; past the limit it fails', async () => {
    const a = newExecution();
    await s.workflows.insert(a);
    const begun = await s.workflows.begin(a.executionId, 1);
    expect(begun).toMatchObject({ kind: 'run', execution: { status: 'running', recoveryAttempts: 0 }, recorded: [] });

    await s.workflows.checkpoint(a.executionId, 0, 'charge', { status: 'completed', result: 'ch_1' }, 1, 'h-charge');
    const replay = await s.workflows.begin(a.executionId, 1);
    expect(replay).toMatchObject({ kind: 'run', execution: { recoveryAttempts: 1 }, recorded: [{ position: 0, name: 'charge', result: 'ch_1', sequence: 0, argsHash: 'h-charge' }] });

    const exhausted = await s.workflows.begin(a.executionId, 1);
    expect(exhausted).toMatchObject({ kind: 'skip', execution: { status: 'failed', error: { name: 'RecoveryAttemptsExhaustedError' } } });
    expect(await s.workflows.begin(a.executionId, 1)).toMatchObject({ kind: 'skip', execution: { status: 'failed' } });
    expect(await s.workflows.begin(randomUUID(), 1)).toEqual({ kind: 'skip', execution: null });
  });

  it('checkpoint: each (execution, position) is written once; a loser gets the winner\'s row', async () => {
    const a = newExecution();
    await s.workflows.insert(a);
    await s.workflows.begin(a.executionId, 10);
    const at = new Date('2026-05-06T07:08:09.000Z');
    const won = await s.workflows.checkpoint(a.executionId, 1, 'ship', { status: 'completed', result: { at, nothing: undefined } }, 2, null);
    expect(won).toMatchObject({ written: true, checkpoint: { position: 1, name: 'ship', status: 'completed', result: { at: at.toISOString() }, attempts: 2 } });
    expect(won.checkpoint.completedAt).toBeInstanceOf(Date);
    const lost = await s.workflows.checkpoint(a.executionId, 1, 'ship', { status: 'failed', error: FAILURE }, 1, null);
    expect(lost).toMatchObject({ written: false, checkpoint: { status: 'completed', result: { at: at.toISOString() }, attempts: 2 } });

    await s.workflows.checkpoint(a.executionId, 0, 'charge', { status: 'failed', error: FAILURE }, 3, null);
    expect((await s.workflows.steps(a.executionId)).map((c) => [c.position, c.name, c.status, c.error])).toEqual([
      [0, 'charge', 'failed', FAILURE],
      [1, 'ship', 'completed', null],
    ]);
    expect(await s.workflows.stepState(a.executionId, 0)).toMatchObject({ status: 'running', checkpoint: { name: 'charge', status: 'failed' } });
    expect(await s.workflows.stepState(a.executionId, 2)).toEqual({ status: 'running', checkpoint: null });
    expect(await s.workflows.stepState(randomUUID(), 0)).toEqual({ status: null, checkpoint: null });
  });

  it('finish: a compare-and-set from pending or running; the result is stored as JSON', async () => {
    const a = newExecution();
    await s.workflows.insert(a);
    await s.workflows.begin(a.executionId, 10);
    await expect(s.workflows.finish(a.executionId, 'completed', { result: { total: 3, list: [1, 2] } })).resolves.toBe(true);
    await expect(s.workflows.finish(a.executionId, 'failed', { error: FAILURE })).resolves.toBe(false);
    const done = (await s.workflows.get(a.executionId)) as WorkflowExecution;
    expect(done).toMatchObject({ status: 'completed', result: { total: 3, list: [1, 2] }, error: null });
    expect(done.completedAt).toBeInstanceOf(Date);

    await s.workflows.deleteFinished(a.executionId);
    expect(await s.workflows.get(a.executionId)).toBeNull();
    expect(await s.workflows.steps(a.executionId)).toEqual([]);
  });

  it('cancel and resume: a cancelled execution resumes from its checkpoints; the failure that ended it runs again', async () => {
    const a = newExecution();
    await s.workflows.insert(a);
    await s.workflows.begin(a.executionId, 10);
    await s.workflows.checkpoint(a.executionId, 0, 'charge', { status: 'completed', result: 'ch_1' }, 1, null);
    expect(await s.workflows.cancel(a.workflowId)).toMatchObject({ executionId: a.executionId, status: 'cancelled' });
    expect(await s.workflows.cancel(a.workflowId)).toBeNull();
    await expect(s.workflows.deleteFinished(randomUUID())).resolves.toBeUndefined();

    const resumed = await s.workflows.resume(a.executionId);
    expect(resumed).toMatchObject({ execution: { status: 'pending', recoveryAttempts: 0 }, retried: [] });
    await s.workflows.begin(a.executionId, 10);
    await s.workflows.checkpoint(a.executionId, 1, 'ship', { status: 'failed', error: FAILURE }, 3, null);
    await s.workflows.finish(a.executionId, 'failed', { error: FAILURE });

    const again = await s.workflows.resume(a.executionId);
    expect(again?.retried.map((c) => [c.position, c.name])).toEqual([[1, 'ship']]);
    expect((await s.workflows.steps(a.executionId)).map((c) => c.name)).toEqual(['charge']);
    expect(await s.workflows.resume(a.executionId)).toBeNull();
  });

  it('journal: sequence numbers follow recording order, not positions; resume re-runs the failures that ended the run and keeps their numbers', async () => {
    const a = newExecution();
    await s.workflows.insert(a);
    await s.workflows.begin(a.executionId, 10);
    await s.workflows.checkpoint(a.executionId, 2, 'late', { status: 'completed', result: 'c' }, 1, null);
    await s.workflows.checkpoint(a.executionId, 0, 'caught', { status: 'failed', error: FAILURE }, 1, null);
    await s.workflows.checkpoint(a.executionId, 1, 'fatal', { status: 'failed', error: FAILURE }, 1, null);
    expect((await s.workflows.recordedBetween(a.executionId, 0, 10)).map((r) => [r.sequence, r.position])).toEqual([[0, 2], [1, 0], [2, 1]]);
    expect((await s.workflows.recordedBetween(a.executionId, 1, 2)).map((r) => r.position)).toEqual([0]);
    await s.workflows.finish(a.executionId, 'failed', { error: FAILURE, end: { deliveredThrough: 2, endedBy: [1] } });

    const resumed = await s.workflows.resume(a.executionId);
    expect(resumed?.retried.map((c) => [c.position, c.status])).toEqual([[1, 'failed']]);
    expect((await s.workflows.steps(a.executionId)).map((c) => c.position)).toEqual([0, 2]);
    expect(await s.workflows.stepState(a.executionId, 1)).toEqual({ status: 'pending', checkpoint: null });
    const begun = await s.workflows.begin(a.executionId, 10);
    expect(begun.kind === 'run' && begun.recorded.map((r) => [r.sequence, r.position, r.status])).toEqual([[0, 2, 'completed'], [1, 0, 'failed'], [2, 1, 'retrying']]);
    const rerun = await s.workflows.checkpoint(a.executionId, 1, 'fatal', { status: 'completed', result: 'ok' }, 2, null);
    expect(rerun).toMatchObject({ written: true, checkpoint: { sequence: 2, status: 'completed', result: 'ok' } });
  });

  it('resume refuses while a newer execution holds the workflow id', async () => {
    const a = newExecution();
    await s.workflows.insert(a);
    await s.workflows.begin(a.executionId, 10);
    await s.workflows.finish(a.executionId, 'failed', { error: FAILURE });
    await s.workflows.insert(newExecution(a.workflowId));
    await expect(s.workflows.resume(a.executionId)).rejects.toMatchObject({ code: '23505' });
  });

  it('list, recovery counting, unfinished scan and deadlines', async () => {
    const name = `contract-${randomUUID().slice(0, 8)}`;
    const a = { ...newExecution(), workflowName: name };
    const b = { ...newExecution(undefined, { timeoutMs: 200 }), workflowName: name };
    await s.workflows.insert(a);
    await s.workflows.insert(b);
    expect((await s.workflows.list({ workflow: name })).map((e) => e.executionId)).toEqual([b.executionId, a.executionId]);
    expect((await s.workflows.list({ workflow: name, limit: 1 })).map((e) => e.executionId)).toEqual([b.executionId]);
    expect(await s.workflows.list({ workflow: name, status: 'completed' })).toEqual([]);

    await expect(s.workflows.countRecovery(a.executionId, 1)).resolves.toBe(true);
    await expect(s.workflows.countRecovery(a.executionId, 1)).resolves.toBe(false);
    expect(await s.workflows.get(a.executionId)).toMatchObject({ status: 'failed', recoveryAttempts: 2, error: { name: 'RecoveryAttemptsExhaustedError' } });

    const timedOut = await waitUntil('the deadline passed', async () => {
      const ids = await s.workflows.timeOutExpired();
      return ids.includes(b.executionId) ? ids : undefined;
    });
    expect(timedOut).toContain(b.executionId);
    expect(await s.workflows.get(b.executionId)).toMatchObject({ status: 'timed_out', error: { name: 'WorkflowTimeoutError' } });

    const c = newExecution();
    await s.workflows.insert(c);
    const idle = await waitUntil('the execution is idle', async () => {
      const found = await s.workflows.unfinished(50, 1000);
      return found.some((u) => u.executionId === c.executionId) ? found : undefined;
    });
    expect(idle.find((u) => u.executionId === c.executionId)).toMatchObject({ workflowName: 'contract', status: 'pending' });
    const after = idle.find((u) => u.executionId === c.executionId);
    const rest = await s.workflows.unfinished(50, 1000, after);
    expect(rest.map((u) => u.executionId)).not.toContain(c.executionId);
  });

  it('the reconciler lock is held by one caller at a time', async () => {
    let inner: boolean | undefined;
    const outer = await s.workflows.withReconcilerLock(async () => {
      inner = await s.workflows.withReconcilerLock(() => Promise.resolve());
    });
    expect([outer, inner]).toEqual([true, false]);
  });
});
