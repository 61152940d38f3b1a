import { INestApplication } from '@nestjs/common';
import {
  MissingTaskIdError, RetentionService, TaskClient, TaskConflictError, TaskExistsError, WorkflowClient, WorkflowFailedError,
  WorkflowNotFoundError, WorkflowTimeoutError,
} from '../../lib';
import { randomUUID } from 'node:crypto';
import { WorkflowStore } from '../../lib/workflow/storage/workflow.store';
import { sql } from '../support/test-app';
import { bootWorkflowApp, scenario } from '../workflow/support';
import { closeGate, openGate, ReceiptTasks, taskRuns } from './fixtures/receipt.tasks';

/** Polls `check` until it holds (a generous bound: the machine may be loaded). */
async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('TaskClient.enqueue: idempotent tasks (seed 000 checklist)', () => {
  const s = scenario();
  let app: INestApplication;
  let tasks: TaskClient;
  const executions = `"${s.schema}".workflow_executions`;

  beforeAll(async () => {
    ({ app } = await bootWorkflowApp(s, [ReceiptTasks], {}, { retention: { tasks: '2h', cleanupInterval: false } }));
    tasks = app.get(TaskClient);
  }, 60_000);
  afterAll(() => app.close());

  it('a duplicate of a pending or running task returns the same execution, or with onConflict "error" names it', async () => {
    closeGate('p-1');
    const first = await tasks.enqueue(ReceiptTasks, 'sendReceipt', ['p-1', 42], { taskId: 'receipt-p-1' });
    await until(async () => (await first.status()) === 'running', 'the task to run');
    const again = await tasks.enqueue(ReceiptTasks, 'sendReceipt', ['p-1', 42], { taskId: 'receipt-p-1' });
    expect(again.executionId).toBe(first.executionId);
    expect(again.taskId).toBe('receipt-p-1');
    const refused = await tasks.enqueue(ReceiptTasks, 'sendReceipt', ['p-1', 42], { taskId: 'receipt-p-1', onConflict: 'error' }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(TaskExistsError);
    expect(refused).toMatchObject({ code: 'TASK_EXISTS', taskId: 'receipt-p-1', existingExecutionId: first.executionId, status: 'running' });
    expect((refused as Error).message).toMatch(/already running/);
    openGate('p-1');
    expect(await again.result({ timeout: 20_000 })).toEqual({ receiptId: 'rcpt-p-1', amount: 42 });
    expect(taskRuns.get('receipt:p-1')).toBe(1);
  });

  it('a duplicate of a completed task returns its cached result without running it; "error" carries completion time and result', async () => {
    const first = await tasks.enqueue(ReceiptTasks, 'sendReceipt', ['p-2', 7], { taskId: 'receipt-p-2' });
    expect(await first.result({ timeout: 20_000 })).toEqual({ receiptId: 'rcpt-p-2', amount: 7 });
    const again = await tasks.enqueue(ReceiptTasks, 'sendReceipt', ['p-2', 7], { taskId: 'receipt-p-2' });
    expect(again.executionId).toBe(first.executionId);
    expect(await again.status()).toBe('completed');
    expect(await again.result()).toEqual({ receiptId: 'rcpt-p-2', amount: 7 });
    const refused = await tasks.enqueue(ReceiptTasks, 'sendReceipt', ['p-2', 7], { taskId: 'receipt-p-2', onConflict: 'error' }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ status: 'completed', existingExecutionId: first.executionId, result: { receiptId: 'rcpt-p-2', amount: 7 } });
    expect((refused as TaskExistsError).completedAt).toBeInstanceOf(Date);
    expect((refused as Error).message).toMatch(/already completed successfully/);
    expect(taskRuns.get('receipt:p-2')).toBe(1);
    expect((await tasks.getTask('receipt-p-2')).executionId).toBe(first.executionId);
    expect((await tasks.list({ task: 'send-receipt', status: 'completed' })).map((e) => e.workflowId)).toEqual(expect.arrayContaining(['receipt-p-2']));
  });

  it('a failed task frees its id: a duplicate enqueue runs a new execution; attempts retry through BullMQ first', async () => {
    const failed = await tasks.enqueue(ReceiptTasks, 'flaky', ['f-1', 2], { taskId: 'flaky-1' });
    await expect(failed.result({ timeout: 20_000 })).rejects.toBeInstanceOf(WorkflowFailedError);
    expect(taskRuns.get('flaky:f-1')).toBe(2); // attempts: 2
    const retried = await tasks.enqueue(ReceiptTasks, 'flaky', ['f-1', 2], { taskId: 'flaky-1' });
    expect(retried.executionId).not.toBe(failed.executionId);
    expect(await retried.result({ timeout: 20_000 })).toBe(3);
  });

  it('WorkflowClient refuses a task id (getHandle, cancel, resume), naming TaskClient; nothing is run or re-enqueued', async () => {
    const failed = await tasks.enqueue(ReceiptTasks, 'flaky', ['f-wf', 5], { taskId: 'flaky-wf' });
    await expect(failed.result({ timeout: 20_000 })).rejects.toBeInstanceOf(WorkflowFailedError);
    const runs = taskRuns.get('flaky:f-wf');
    const workflows = app.get(WorkflowClient);
    for (const call of [() => workflows.getHandle('flaky-wf'), () => workflows.cancel('flaky-wf'), () => workflows.resume('flaky-wf')]) {
      const refused = await call().catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(WorkflowNotFoundError);
      expect((refused as Error).message).toMatch(/is the id of a task \(flaky\).*TaskClient/);
    }
    expect(await failed.status()).toBe('failed');
    const [{ n }] = await sql<{ n: number }>(`SELECT count(*)::int AS n FROM ${executions} WHERE workflow_id = 'flaky-wf'`);
    expect(n).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 300)); // a re-enqueued job would run within this
    expect(taskRuns.get('flaky:f-wf')).toBe(runs);
  });

  it('WorkflowClient.cancel leaves alone a task that took the id after the client looked it up (a failed workflow had it)', async () => {
    closeGate('p-race');
    const task = await tasks.enqueue(ReceiptTasks, 'sendReceipt', ['p-race', 1], { taskId: 'receipt-p-race' });
    await until(async () => (await task.status()) === 'running', 'the task to run');
    const store = app.get(WorkflowStore);
    const live = (await store.latest('receipt-p-race'))!;
    // The interleaving: cancel() read the id while a failed workflow held it; the task was enqueued right after.
    jest.spyOn(store, 'latest').mockResolvedValueOnce({ ...live, executionId: randomUUID(), kind: 'workflow', status: 'failed' });
    expect(await app.get(WorkflowClient).cancel('receipt-p-race')).toBe(false);
    expect(await task.status()).toBe('running');
    openGate('p-race');
    expect(await task.result({ timeout: 20_000 })).toEqual({ receiptId: 'rcpt-p-race', amount: 1 });
  });

  it('the same id with other arguments is a TaskConflictError and enqueues nothing', async () => {
    const first = await tasks.enqueue(ReceiptTasks, 'sendReceipt', ['p-3', 1], { taskId: 'receipt-p-3' });
    await expect(tasks.enqueue(ReceiptTasks, 'sendReceipt', ['p-3', 2], { taskId: 'receipt-p-3' })).rejects.toBeInstanceOf(TaskConflictError);
    await expect(tasks.enqueue(ReceiptTasks, 'keyed', [1], { taskId: 'receipt-p-3' })).rejects.toThrow(/of another task \("send-receipt"\)/);
    expect(await first.result({ timeout: 20_000 })).toEqual({ receiptId: 'rcpt-p-3', amount: 1 });
    expect(await sql(`SELECT 1 FROM ${executions} WHERE workflow_id = 'receipt-p-3'`)).toHaveLength(1);
  });

  it('derives the task id by identity strategy: strict from name + canonical arguments, caller_provided refuses, always_unique draws one', async () => {
    const a = await tasks.enqueue(ReceiptTasks, 'sendReceipt', ['p-4', { b: 2, a: 1 }] as unknown as [string, number]);
    const b = await tasks.enqueue(ReceiptTasks, 'sendReceipt', ['p-4', { a: 1, b: 2 }] as unknown as [string, number]);
    expect(b.taskId).toBe(a.taskId);
    expect(a.taskId).toMatch(/^send-receipt:/);
    await expect(tasks.enqueue(ReceiptTasks, 'keyed', [3])).rejects.toBeInstanceOf(MissingTaskIdError);
    expect(await (await tasks.enqueue(ReceiptTasks, 'keyed', [3], { taskId: 'k-3' })).result({ timeout: 20_000 })).toBe(6);
    const u1 = await tasks.enqueue(ReceiptTasks, 'unique', [5]);
    const u2 = await tasks.enqueue(ReceiptTasks, 'unique', [5]);
    expect(u1.taskId).not.toBe(u2.taskId);
    await Promise.all([u1.result({ timeout: 20_000 }), u2.result({ timeout: 20_000 })]);
    expect(taskRuns.get('unique:5')).toBe(2);
  });

  it('a task whose last attempt passes its timeout ends timed out, and its id is free again', async () => {
    const handle = await tasks.enqueue(ReceiptTasks, 'slow', ['s-1', 5_000], { taskId: 'slow-1' });
    await expect(handle.result({ timeout: 20_000 })).rejects.toBeInstanceOf(WorkflowTimeoutError);
    expect(await handle.status()).toBe('timed_out');
    const again = await tasks.enqueue(ReceiptTasks, 'slow', ['s-1', 5_000], { taskId: 'slow-1' });
    expect(again.executionId).not.toBe(handle.executionId);
    await tasks.cancel('slow-1');
  });

  it('transaction: true commits the task\'s writes with its result', async () => {
    const table = `"${s.schema}".ledger`;
    await sql(`CREATE TABLE ${table} (id text PRIMARY KEY)`);
    const handle = await tasks.enqueue(ReceiptTasks, 'ledger', [table, 'l-1'], { taskId: 'ledger-1' });
    expect(await handle.result({ timeout: 20_000 })).toBe('l-1');
    expect(await sql(`SELECT id FROM ${table}`)).toEqual([{ id: 'l-1' }]);
  });

  it('cancel: a delayed task that has not started never runs', async () => {
    const handle = await tasks.enqueue(ReceiptTasks, 'sendReceipt', ['p-5', 1], { taskId: 'receipt-p-5', delay: '10s' });
    await expect(tasks.cancel('receipt-p-5')).resolves.toBe(true);
    expect(await handle.status()).toBe('cancelled');
    await expect(tasks.cancel('receipt-p-5')).resolves.toBe(false);
    expect(taskRuns.get('receipt:p-5')).toBeUndefined();
  });

  it('retention: tasks default to retention.tasks; cleanup frees the id for a new execution', async () => {
    const first = await tasks.enqueue(ReceiptTasks, 'sendReceipt', ['p-6', 1], { taskId: 'receipt-p-6' });
    await first.result({ timeout: 20_000 });
    await sql(`UPDATE ${executions} SET completed_at = now() - interval '90 minutes' WHERE workflow_id = 'receipt-p-6'`);
    await app.get(RetentionService).cleanup();
    expect((await tasks.enqueue(ReceiptTasks, 'sendReceipt', ['p-6', 1], { taskId: 'receipt-p-6' })).executionId).toBe(first.executionId);
    await sql(`UPDATE ${executions} SET completed_at = now() - interval '3 hours' WHERE workflow_id = 'receipt-p-6'`);
    await app.get(RetentionService).cleanup();
    const fresh = await tasks.enqueue(ReceiptTasks, 'sendReceipt', ['p-6', 1], { taskId: 'receipt-p-6' });
    expect(fresh.executionId).not.toBe(first.executionId);
    await fresh.result({ timeout: 20_000 });
    expect(taskRuns.get('receipt:p-6')).toBe(2);
  });

  it('retention: @Task({ retention }) wins over retention.tasks', async () => {
    const audit = await tasks.enqueue(ReceiptTasks, 'audit', [1], { taskId: 'audit-1' });
    await audit.result({ timeout: 20_000 });
    await sql(`UPDATE ${executions} SET completed_at = now() - interval '30 minutes' WHERE workflow_id = 'audit-1'`);
    await app.get(RetentionService).cleanup();
    expect(await sql(`SELECT 1 FROM ${executions} WHERE workflow_id = 'audit-1'`)).toEqual([]);
  });
});
