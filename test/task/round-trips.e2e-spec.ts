import { INestApplication } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { TaskClient, WorkflowFailedError } from '../../lib';
import { WorkflowStore } from '../../lib/workflow/storage/workflow.store';
import { bootWorkflowApp, scenario } from '../workflow/support';
import { ReceiptTasks, taskRuns } from './fixtures/receipt.tasks';

jest.setTimeout(60_000); // real Postgres and Redis; waits are bounded by result()'s own timeout

/** The store calls a task job's worker makes, by name, for one execution. */
function workerCalls(spies: Record<string, jest.SpyInstance>, executionId: string): Record<string, number> {
  return Object.fromEntries(Object.entries(spies).map(([name, spy]) => [name, spy.mock.calls.filter((c) => c[0] === executionId).length]));
}

describe('tasks: Postgres statements per task job', () => {
  const s = scenario();
  let app: INestApplication;
  let tasks: TaskClient;
  let spies: Record<string, jest.SpyInstance>;

  beforeAll(async () => {
    ({ app } = await bootWorkflowApp(s, [ReceiptTasks]));
    tasks = app.get(TaskClient);
    const store = app.get(WorkflowStore);
    spies = Object.fromEntries(
      (['startTaskAttempt', 'checkpointTask', 'markRunning', 'stepState', 'checkpoint', 'finish'] as const).map((name) => [name, jest.spyOn(store, name)]),
    );
  }, 60_000);

  afterAll(async () => {
    jest.restoreAllMocks();
    await app?.close();
  });

  it('an attempt that succeeds costs two statements: one starts it and reads its state, one checkpoints and finishes it', async () => {
    const handle = await tasks.enqueue(ReceiptTasks, 'sendReceipt', ['rt-1', 5], { taskId: `receipt-${randomUUID()}` });
    expect(await handle.result({ timeout: 20_000 })).toEqual({ receiptId: 'rcpt-rt-1', amount: 5 });
    expect(workerCalls(spies, handle.executionId)).toEqual({ startTaskAttempt: 1, checkpointTask: 1, markRunning: 0, stepState: 0, checkpoint: 0, finish: 0 });
    expect((await tasks.getTask(handle.taskId)).executionId).toBe(handle.executionId);
  });

  it('each retried attempt starts with one statement; the last outcome is checkpointed and ends the execution in one', async () => {
    const key = randomUUID();
    const retried = await tasks.enqueue(ReceiptTasks, 'flaky', [key, 1]);
    expect(await retried.result({ timeout: 20_000 })).toBe(2);
    expect(workerCalls(spies, retried.executionId)).toEqual({ startTaskAttempt: 2, checkpointTask: 1, markRunning: 0, stepState: 0, checkpoint: 0, finish: 0 });

    const failing = await tasks.enqueue(ReceiptTasks, 'flaky', [`${key}-f`, 5]);
    await expect(failing.result({ timeout: 20_000 })).rejects.toBeInstanceOf(WorkflowFailedError);
    expect(taskRuns.get(`flaky:${key}-f`)).toBe(2);
    expect(workerCalls(spies, failing.executionId)).toEqual({ startTaskAttempt: 2, checkpointTask: 1, markRunning: 0, stepState: 0, checkpoint: 0, finish: 0 });
    expect(await failing.status()).toBe('failed');
  });
});
