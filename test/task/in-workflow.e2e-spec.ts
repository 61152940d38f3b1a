import { INestApplication } from '@nestjs/common';
import { Step, TaskClient, Workflow, WorkflowClient, WorkflowFailedError } from '../../lib';
import { sql } from '../support/test-app';
import { bootWorkflowApp, scenario } from '../workflow/support';
import { ReceiptTasks, taskRuns } from './fixtures/receipt.tasks';

/** Fails its first call per payment (the workflow then fails; resume runs it again). */
const finalCalls = new Map<string, number>();

@Workflow({ name: 'checkout' })
class CheckoutWorkflow {
  constructor(private readonly receipts: ReceiptTasks) {}

  async run(input: { paymentId: string }): Promise<{ receiptId: string; amount: number }> {
    const receipt = await this.receipts.sendReceipt(input.paymentId, 10);
    await this.settle(input.paymentId);
    return receipt;
  }

  @Step()
  settle(paymentId: string): Promise<void> {
    const n = (finalCalls.get(paymentId) ?? 0) + 1;
    finalCalls.set(paymentId, n);
    return n === 1 ? Promise.reject(new Error('settlement unavailable')) : Promise.resolve();
  }
}

describe('tasks are tasks: a @Task() called from a workflow runs as its step', () => {
  const s = scenario();
  let app: INestApplication;
  let client: WorkflowClient;
  let tasks: TaskClient;

  beforeAll(async () => {
    ({ app, client } = await bootWorkflowApp(s, [ReceiptTasks, CheckoutWorkflow]));
    tasks = app.get(TaskClient);
  }, 60_000);
  afterAll(() => app.close());

  it('is checkpointed at its journal position on the task queue, recorded under its parent, and not run again on resume', async () => {
    const handle = await client.start(CheckoutWorkflow, { paymentId: 'w-1' }, { workflowId: 'checkout-w-1' });
    await expect(handle.result({ timeout: 20_000 })).rejects.toBeInstanceOf(WorkflowFailedError);
    const steps = await client.steps(handle.executionId);
    expect(steps[0]).toMatchObject({ position: 0, name: 'send-receipt', status: 'completed', result: { receiptId: 'rcpt-w-1', amount: 10 } });
    expect(taskRuns.get('receipt:w-1')).toBe(1);

    const records = await tasks.list({ task: 'send-receipt' });
    expect(records).toEqual([expect.objectContaining({ kind: 'task', parentExecutionId: handle.executionId, status: 'completed', result: { receiptId: 'rcpt-w-1', amount: 10 } })]);
    expect((await tasks.getTask(records[0].workflowId)).executionId).toBe(records[0].executionId);

    const resumed = await client.resume(handle.workflowId);
    expect(await resumed.result({ timeout: 20_000 })).toEqual({ receiptId: 'rcpt-w-1', amount: 10 });
    expect(taskRuns.get('receipt:w-1')).toBe(1); // the checkpoint answered it
    expect(finalCalls.get('w-1')).toBe(2);
  });

  it('called outside a workflow it is a plain method call: it runs here and stores nothing', async () => {
    const before = await sql(`SELECT count(*)::int AS n FROM "${s.schema}".workflow_executions`);
    await expect(app.get(ReceiptTasks).sendReceipt('plain-1', 3)).resolves.toEqual({ receiptId: 'rcpt-plain-1', amount: 3 });
    expect(taskRuns.get('receipt:plain-1')).toBe(1);
    expect(await sql(`SELECT count(*)::int AS n FROM "${s.schema}".workflow_executions`)).toEqual(before);
  });
});
