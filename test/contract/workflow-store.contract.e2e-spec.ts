import { randomUUID } from 'node:crypto';
import type { WorkflowExecution } from '../../lib';
import { waitUntil } from '../support/resilience';
import { bootForSuite, IMPLEMENTATIONS } from './implementations';

/** A new execution of a fresh workflow id (ids are UUIDs, as the client makes them). */
function newExecution(workflowId = `wf-${randomUUID()}`, extra: { input?: unknown; timeoutMs?: number; parentExecutionId?: string } = {}) {
  return {
    executionId: randomUUID(), workflowId, workflowName: 'contract', input: extra.input ?? { n: 1 }, inputHash: 'hash-1', timeoutMs: extra.timeoutMs,
    ...(extra.parentExecutionId ? { parentExecutionId: extra.parentExecutionId } : {}),
  };
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
    expect(begun).toMatchObject({ kind: 'run', execution: { status: 'running', recoveryAttempts: 0 }, recorded: [], firstRun: true });

    // The checkpoint tells the run what it saw of the execution: a run compares the recovery count with its own.
    expect(await s.workflows.checkpoint(a.executionId, 0, 'charge', { status: 'completed', result: 'ch_1' }, 1, 'h-charge'))
      .toMatchObject({ written: true, execution: { status: 'running', recoveryAttempts: 0 } });
    const replay = await s.workflows.begin(a.executionId, 1);
    expect(replay).toMatchObject({ kind: 'run', execution: { recoveryAttempts: 1 }, recorded: [{ position: 0, name: 'charge', result: 'ch_1', sequence: 0, argsHash: 'h-charge' }], firstRun: false });
    expect(await s.workflows.checkpoint(a.executionId, 0, 'charge', { status: 'completed', result: 'other' }, 1, 'h-charge'))
      .toMatchObject({ written: false, checkpoint: { result: 'ch_1' }, execution: { status: 'running', recoveryAttempts: 1 } });

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
    expect(await s.workflows.begin(a.executionId, 10)).toMatchObject({ kind: 'run', firstRun: false });
    await s.workflows.checkpoint(a.executionId, 1, 'ship', { status: 'failed', error: FAILURE }, 3, null);
    await s.workflows.finish(a.executionId, 'failed', { error: FAILURE });

    const again = await s.workflows.resume(a.executionId);
    expect(again?.retried.map((c) => [c.position, c.name])).toEqual([[1, 'ship']]);
    expect((await s.workflows.steps(a.executionId)).map((c) => c.name)).toEqual(['charge']);
    expect(await s.workflows.resume(a.executionId)).toBeNull();
  });

  it('cancel with a kind leaves the live execution of the other kind under the same id alone', async () => {
    const task = { ...newExecution(), kind: 'task' as const };
    await s.workflows.insert(task);
    expect(await s.workflows.cancel(task.workflowId, 'workflow')).toBeNull();
    expect(await s.workflows.get(task.executionId)).toMatchObject({ status: 'pending', kind: 'task' });
    expect(await s.workflows.cancel(task.workflowId, 'task')).toMatchObject({ executionId: task.executionId, status: 'cancelled' });
  });

  it('checkpoint after cancel: the step that was running still checkpoints, and learns of the cancellation from it', async () => {
    const a = newExecution();
    await s.workflows.insert(a);
    await s.workflows.begin(a.executionId, 10);
    await s.workflows.cancel(a.workflowId);
    expect(await s.workflows.checkpoint(a.executionId, 0, 'running', { status: 'completed', result: 'r' }, 1, null))
      .toMatchObject({ written: true, checkpoint: { result: 'r' }, execution: { status: 'cancelled', recoveryAttempts: 0 } });
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

  it('waits: a wait is registered once per position; a replay reads the stored wake-up time back', async () => {
    const a = newExecution();
    await s.workflows.insert(a);
    await s.workflows.begin(a.executionId, 10);
    const before = Date.now();
    const { wakeAt } = await s.workflows.registerWait(a.executionId, 0, 'sleep', null, 60_000);
    expect(wakeAt).toBeGreaterThanOrEqual(before + 59_000);
    // A replay (or another call) at the position gets what was registered first, to compare.
    await expect(s.workflows.registerWait(a.executionId, 0, 'recv', 'h-topic', 1)).resolves.toEqual({ kind: 'sleep', argsHash: null, wakeAt });
    await expect(s.workflows.registerWait(a.executionId, 1, 'recv', 'h-topic', null)).resolves.toEqual({ kind: 'recv', argsHash: 'h-topic', wakeAt: Infinity });
    expect(await s.workflows.begin(a.executionId, 10)).toMatchObject({
      kind: 'run', waits: new Map([[0, { kind: 'sleep', argsHash: null, wakeAt }], [1, { kind: 'recv', argsHash: 'h-topic', wakeAt: Infinity }]]),
    });
    await expect(s.workflows.registerWait(randomUUID(), 0, 'sleep', null, 1)).rejects.toThrow(/no longer exists/);
  });

  it('messages: stored once per idempotency key, received once each in send order per topic, refused for finished executions', async () => {
    const a = newExecution();
    await s.workflows.insert(a);
    await s.workflows.begin(a.executionId, 10);
    expect(await s.workflows.send(a.workflowId, 't', { n: 1 }, 'k1')).toMatchObject({ stored: true, duplicate: false, execution: { executionId: a.executionId } });
    expect(await s.workflows.send(a.workflowId, 't', { n: 1 }, 'k1')).toMatchObject({ stored: false, duplicate: true });
    await s.workflows.send(a.workflowId, 'other', 'x', null);
    await s.workflows.send(a.workflowId, 't', { n: 2 }, null);
    await expect(s.workflows.wakeRequested(a.executionId)).resolves.toBe(true);
    expect(await s.workflows.receive(a.executionId, 0, 't', 'h')).toMatchObject({ position: 0, name: '@recv', status: 'completed', result: { message: { n: 1 } } });
    // The position already holds its message: asking again returns it, nothing else is consumed.
    expect(await s.workflows.receive(a.executionId, 0, 't', 'h')).toMatchObject({ result: { message: { n: 1 } } });
    expect(await s.workflows.receive(a.executionId, 1, 't', 'h')).toMatchObject({ result: { message: { n: 2 } } });
    await expect(s.workflows.receive(a.executionId, 2, 't', 'h')).resolves.toBeNull();
    expect(await s.workflows.receive(a.executionId, 2, 'other', 'h')).toMatchObject({ result: { message: 'x' } });

    await s.workflows.finish(a.executionId, 'completed', { result: null });
    expect(await s.workflows.send(a.workflowId, 't', 'late', null)).toMatchObject({ stored: false, duplicate: false, execution: { status: 'completed' } });
    expect(await s.workflows.send(a.workflowId, 't', 'late', 'k1')).toMatchObject({ stored: false, duplicate: true });
    await expect(s.workflows.send(`wf-${randomUUID()}`, 't', 1, null)).resolves.toBeNull();
  });

  it('suspend: a compare-and-set that a wake request since begin defeats; begin clears it', async () => {
    const a = newExecution();
    await s.workflows.insert(a);
    await s.workflows.begin(a.executionId, 10);
    const until = Date.now() + 60_000;
    await expect(s.workflows.suspend(a.executionId, until)).resolves.toBe('suspended');
    expect(await s.workflows.get(a.executionId)).toMatchObject({ status: 'pending' });
    expect((await s.workflows.get(a.executionId))?.suspendedUntil?.getTime()).toBeCloseTo(until, -3);
    await expect(s.workflows.suspend(a.executionId, until)).resolves.toBe('stopped');

    expect(await s.workflows.begin(a.executionId, 10)).toMatchObject({ kind: 'run', execution: { recoveryAttempts: 0, suspendedUntil: null } });
    await expect(s.workflows.requestWake(a.executionId)).resolves.toMatchObject({ executionId: a.executionId });
    await expect(s.workflows.suspend(a.executionId, Infinity)).resolves.toBe('woken');
    await s.workflows.begin(a.executionId, 10);
    await expect(s.workflows.wakeRequested(a.executionId)).resolves.toBe(false);
    await expect(s.workflows.suspend(a.executionId, Infinity)).resolves.toBe('suspended');
    expect((await s.workflows.get(a.executionId))?.suspendedUntil?.getTime()).toBeGreaterThan(Date.now() + 365 * 86_400_000);
    const idle = await waitUntil('the suspended execution is idle', async () => {
      const found = await s.workflows.unfinished(50, 1000);
      return found.find((u) => u.executionId === a.executionId);
    });
    expect(idle).toMatchObject({ status: 'pending', suspendedUntil: Infinity, wakeRequested: false });

    await s.workflows.finish(a.executionId, 'completed', { result: null });
    await expect(s.workflows.requestWake(a.executionId)).resolves.toBeNull();
  });

  it('events: the latest value per key of the newest execution', async () => {
    const a = newExecution();
    await s.workflows.insert(a);
    expect(await s.workflows.getEvent(a.workflowId, 'status')).toMatchObject({ found: false, value: null, execution: { executionId: a.executionId } });
    await s.workflows.setEvent(a.executionId, 'status', { step: 1 });
    await s.workflows.setEvent(a.executionId, 'status', { step: 2 });
    expect(await s.workflows.getEvent(a.workflowId, 'status')).toMatchObject({ found: true, value: { step: 2 } });
    await s.workflows.setEvent(a.executionId, 'nothing', null);
    expect(await s.workflows.getEvent(a.workflowId, 'nothing')).toMatchObject({ found: true, value: null });
    await expect(s.workflows.getEvent(`wf-${randomUUID()}`, 'status')).resolves.toBeNull();
  });

  it('children: linked to their parent, listed by it, cancelled with it at any depth', async () => {
    const parent = newExecution();
    await s.workflows.insert(parent);
    const child = newExecution(undefined, { parentExecutionId: parent.executionId });
    const grandchild = newExecution(undefined, { parentExecutionId: child.executionId });
    const done = newExecution(undefined, { parentExecutionId: parent.executionId });
    for (const e of [child, grandchild, done]) await s.workflows.insert(e);
    await s.workflows.begin(done.executionId, 10);
    await s.workflows.finish(done.executionId, 'completed', { result: 1 });
    expect((await s.workflows.list({ parentExecutionId: parent.executionId })).map((e) => e.executionId).sort())
      .toEqual([child.executionId, done.executionId].sort());
    expect(await s.workflows.get(child.executionId)).toMatchObject({ parentExecutionId: parent.executionId });
    expect(await s.workflows.get(parent.executionId)).toMatchObject({ parentExecutionId: null });
    await s.workflows.cancel(parent.workflowId);
    expect(await Promise.all([child, grandchild, done].map(async (e) => (await s.workflows.get(e.executionId))?.status))).toEqual(['cancelled', 'cancelled', 'completed']);
  });

  it('tasks: kind is stored, shares the id namespace with workflows, lists apart; markRunning without counting a recovery', async () => {
    const task = { ...newExecution(`task-${randomUUID()}`), kind: 'task' as const, workflowName: 'send-receipt' };
    expect(await s.workflows.insert(task)).toMatchObject({ inserted: true, execution: { kind: 'task', status: 'pending' } });
    // One id namespace: a workflow start with a live task's id finds the task (the clients refuse it as a conflict).
    expect(await s.workflows.insert(newExecution(task.workflowId))).toMatchObject({ inserted: false, execution: { executionId: task.executionId, kind: 'task' } });
    expect((await s.workflows.get(task.executionId))?.kind).toBe('task');

    await expect(s.workflows.markRunning(task.executionId)).resolves.toBe(true);
    await expect(s.workflows.markRunning(task.executionId)).resolves.toBe(true);
    expect(await s.workflows.get(task.executionId)).toMatchObject({ status: 'running', recoveryAttempts: 0 });

    const tasks = await s.workflows.list({ kind: 'task', workflow: 'send-receipt' });
    expect(tasks.map((e) => e.executionId)).toContain(task.executionId);
    expect((await s.workflows.list({ workflow: 'send-receipt' })).map((e) => e.executionId)).not.toContain(task.executionId);

    await s.workflows.finish(task.executionId, 'completed', { result: { sent: true } });
    await expect(s.workflows.markRunning(task.executionId)).resolves.toBe(false);
    await expect(s.workflows.markRunning(randomUUID())).resolves.toBe(false);
    const workflow = newExecution();
    expect(await s.workflows.insert(workflow)).toMatchObject({ execution: { kind: 'workflow' } });
  });

  it('tasks: startTaskAttempt marks running and reads the checkpoint; checkpointTask writes once and ends the execution with its outcome', async () => {
    const task = () => ({ ...newExecution(`task-${randomUUID()}`), kind: 'task' as const, workflowName: 'send-receipt' });
    const a = task();
    await s.workflows.insert(a);
    expect(await s.workflows.startTaskAttempt(a.executionId, 0)).toEqual({ status: 'running', checkpoint: null });
    expect(await s.workflows.get(a.executionId)).toMatchObject({ status: 'running', recoveryAttempts: 0 });
    const first = await s.workflows.checkpointTask(a.executionId, 0, 'send', { status: 'completed', result: { sent: 1 } }, 1, 'h', 'completed');
    expect(first).toMatchObject({ written: true, checkpoint: { position: 0, name: 'send', status: 'completed', result: { sent: 1 } }, execution: { status: 'running' } });
    expect(await s.workflows.get(a.executionId)).toMatchObject({ status: 'completed', result: { sent: 1 }, error: null });
    expect((await s.workflows.get(a.executionId))?.completedAt).toBeInstanceOf(Date);
    // A second writer (a stalled attempt run again) gets the first outcome and changes nothing.
    const second = await s.workflows.checkpointTask(a.executionId, 0, 'send', { status: 'completed', result: { sent: 2 } }, 2, 'h', 'completed');
    expect(second).toMatchObject({ written: false, checkpoint: { result: { sent: 1 }, attempts: 1 }, execution: { status: 'completed' } });
    expect(await s.workflows.get(a.executionId)).toMatchObject({ status: 'completed', result: { sent: 1 } });
    expect(await s.workflows.startTaskAttempt(a.executionId, 0)).toMatchObject({ status: 'completed', checkpoint: { result: { sent: 1 } } });

    // A timed-out last attempt ends the execution as timed_out with the error.
    const b = task();
    await s.workflows.insert(b);
    const timeout = { name: 'StepTimeoutError', message: 'too slow' };
    expect(await s.workflows.checkpointTask(b.executionId, 0, 'send', { status: 'failed', error: timeout }, 3, null, 'timed_out')).toMatchObject({ written: true });
    expect(await s.workflows.get(b.executionId)).toMatchObject({ status: 'timed_out', error: timeout, result: null });

    // A cancelled execution keeps its status; the outcome is recorded as the step's only.
    const c = task();
    await s.workflows.insert(c);
    await s.workflows.cancel(c.workflowId);
    expect(await s.workflows.startTaskAttempt(c.executionId, 0)).toEqual({ status: 'cancelled', checkpoint: null });
    expect(await s.workflows.checkpointTask(c.executionId, 0, 'send', { status: 'completed', result: 1 }, 1, null, 'completed')).toMatchObject({ written: true, execution: { status: 'cancelled' } });
    expect(await s.workflows.get(c.executionId)).toMatchObject({ status: 'cancelled', result: null });

    expect(await s.workflows.startTaskAttempt(randomUUID(), 0)).toEqual({ status: null, checkpoint: null });

    // Starts made together (one statement in Postgres) answer each its own execution, in any mix of states.
    const fresh = [task(), task(), task()];
    for (const e of fresh) await s.workflows.insert(e);
    const together = await Promise.all([
      ...fresh.map((e) => s.workflows.startTaskAttempt(e.executionId, 0)),
      s.workflows.startTaskAttempt(a.executionId, 0),
      s.workflows.startTaskAttempt(c.executionId, 0),
      s.workflows.startTaskAttempt(randomUUID(), 0),
      s.workflows.startTaskAttempt(fresh[0].executionId, 0),
    ]);
    expect(together).toEqual([
      { status: 'running', checkpoint: null }, { status: 'running', checkpoint: null }, { status: 'running', checkpoint: null },
      { status: 'completed', checkpoint: expect.objectContaining({ result: { sent: 1 } }) as unknown },
      { status: 'cancelled', checkpoint: expect.objectContaining({ result: 1 }) as unknown },
      { status: null, checkpoint: null },
      { status: 'running', checkpoint: null },
    ]);
    for (const e of fresh) expect(await s.workflows.get(e.executionId)).toMatchObject({ status: 'running', recoveryAttempts: 0 });

    // Outcomes written together (one statement in Postgres) end each its own execution, in any mix of states.
    const cancelled = task();
    await s.workflows.insert(cancelled);
    await s.workflows.cancel(cancelled.workflowId);
    const oops = { name: 'Error', message: 'no "receipt" \\ today' };
    const ends = await Promise.all([
      s.workflows.checkpointTask(fresh[0].executionId, 0, 'send', { status: 'completed', result: { n: 'a "quoted" \\ one' } }, 1, 'h0', 'completed'),
      s.workflows.checkpointTask(fresh[1].executionId, 0, 'send', { status: 'failed', error: oops }, 2, null, 'failed'),
      s.workflows.checkpointTask(fresh[2].executionId, 0, 'send', { status: 'completed', result: null }, 1, null, 'completed'),
      s.workflows.checkpointTask(a.executionId, 0, 'send', { status: 'completed', result: 'late' }, 3, null, 'completed'),
      s.workflows.checkpointTask(cancelled.executionId, 0, 'send', { status: 'completed', result: 7 }, 1, null, 'completed'),
    ]);
    expect(ends.map((r) => [r.written, r.checkpoint.result, r.execution?.status])).toEqual([
      [true, { n: 'a "quoted" \\ one' }, 'running'], [true, null, 'running'], [true, null, 'running'], [false, { sent: 1 }, 'completed'], [true, 7, 'cancelled'],
    ]);
    expect(ends[1].checkpoint).toMatchObject({ status: 'failed', error: oops, attempts: 2 });
    expect(await s.workflows.get(fresh[0].executionId)).toMatchObject({ status: 'completed', result: { n: 'a "quoted" \\ one' } });
    expect(await s.workflows.get(fresh[1].executionId)).toMatchObject({ status: 'failed', error: oops, result: null });
    expect(await s.workflows.get(fresh[2].executionId)).toMatchObject({ status: 'completed', result: null });
    expect(await s.workflows.get(a.executionId)).toMatchObject({ status: 'completed', result: { sent: 1 } });
    expect(await s.workflows.get(cancelled.executionId)).toMatchObject({ status: 'cancelled', result: null });
    expect((await s.workflows.steps(fresh[0].executionId)).map((c) => c.sequence)).toEqual([0]);

    // Concurrent writers: one writes and ends the execution with its own outcome; every other gets that row.
    const d = task();
    await s.workflows.insert(d);
    const racing = await Promise.all([1, 2, 3, 4, 5].map((n) => s.workflows.checkpointTask(d.executionId, 0, 'send', { status: 'completed', result: n }, n, null, 'completed')));
    const winners = racing.filter((r) => r.written);
    expect(winners).toHaveLength(1);
    expect(new Set(racing.map((r) => r.checkpoint.result))).toEqual(new Set([winners[0].checkpoint.result]));
    expect(await s.workflows.get(d.executionId)).toMatchObject({ status: 'completed', result: winners[0].checkpoint.result });
  });

  it('checkpoints written together (concurrent workflows, parallel steps) each take their own sequence number', async () => {
    const runs = [newExecution(), newExecution(), newExecution()];
    for (const e of runs) {
      await s.workflows.insert(e);
      await s.workflows.begin(e.executionId, 10);
    }
    await s.workflows.cancel(runs[2].workflowId);
    const written = await Promise.all([
      ...runs.map((e, n) => s.workflows.checkpoint(e.executionId, 0, 'a', { status: 'completed', result: n }, 1, null)),
      s.workflows.checkpoint(runs[0].executionId, 1, 'b', { status: 'completed', result: 'b' }, 1, null),
      s.workflows.checkpoint(runs[0].executionId, 2, 'c', { status: 'failed', error: FAILURE }, 1, null),
      s.workflows.checkpoint(runs[1].executionId, 0, 'a', { status: 'completed', result: 'loser' }, 1, null),
    ]);
    expect(written.map((w) => [w.written, w.checkpoint.result, w.execution?.status])).toEqual([
      [true, 0, 'running'], [true, 1, 'running'], [true, 2, 'cancelled'], [true, 'b', 'running'], [true, null, 'running'], [false, 1, 'running'],
    ]);
    const journal = await s.workflows.recordedBetween(runs[0].executionId, 0, 100);
    expect(journal.map((c) => c.sequence).sort()).toEqual([0, 1, 2]);
    expect(journal.map((c) => c.name).sort()).toEqual(['a', 'b', 'c']);
    // Checkpoints leave the execution's status alone (cancelled stays cancelled, running stays running).
    expect((await s.workflows.get(runs[2].executionId))?.status).toBe('cancelled');
    expect((await s.workflows.get(runs[0].executionId))?.status).toBe('running');
  });

  it('starts made together (one statement in Postgres) each insert or find the holder of their workflow id', async () => {
    const held = newExecution();
    await s.workflows.insert(held);
    const parent = newExecution();
    await s.workflows.insert(parent);
    const fresh = newExecution(undefined, { input: { quote: 'a "b" \\ c' }, timeoutMs: 60_000, parentExecutionId: parent.executionId });
    const task = { ...newExecution(`task-${randomUUID()}`), kind: 'task' as const };
    const twin = newExecution();
    const answers = await Promise.all([
      s.workflows.insert(fresh),
      s.workflows.insert(newExecution(held.workflowId)),
      s.workflows.insert(task),
      s.workflows.insert(twin),
      s.workflows.insert(newExecution(twin.workflowId)),
    ]);
    expect(answers.map((a) => [a.inserted, a.execution.executionId])).toEqual([
      [true, fresh.executionId], [false, held.executionId], [true, task.executionId], [true, twin.executionId], [false, twin.executionId],
    ]);
    expect(answers[0].execution).toMatchObject({ status: 'pending', input: { quote: 'a "b" \\ c' }, inputHash: 'hash-1', parentExecutionId: parent.executionId });
    expect(answers[0].execution.deadlineAt?.getTime()).toBeGreaterThan(Date.now());
    expect(answers[2].execution.kind).toBe('task');
    expect(answers[3].execution.deadlineAt).toBeNull();
  });

  it('the reconciler lock is held by one caller at a time', async () => {
    let inner: boolean | undefined;
    const outer = await s.workflows.withReconcilerLock(async () => {
      inner = await s.workflows.withReconcilerLock(() => Promise.resolve());
    });
    expect([outer, inner]).toEqual([true, false]);
  });
});
