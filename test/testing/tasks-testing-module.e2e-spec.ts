import { INestApplication, Injectable } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { IdempotencyTestingModule, Task, TaskClient, TaskConflictError, WorkflowDefinitionError, WorkflowFailedError } from '../../lib';

let sent = 0;
const sentTo: string[] = [];

@Injectable()
class Mailer {
  @Task({ name: 'mem-receipt', attempts: 2 })
  send(paymentId: string): Promise<string> {
    sent++;
    sentTo.push(paymentId);
    return paymentId === 'bad' ? Promise.reject(new Error('no such payment')) : Promise.resolve(`sent ${paymentId}`);
  }
}

@Injectable()
class Ledger {
  @Task({ transaction: true })
  write(): Promise<void> {
    return Promise.resolve();
  }
}

// Tasks in the in-memory test mode: enqueued tasks run in process through the same step worker, with the same rules.
describe('IdempotencyTestingModule: tasks', () => {
  let app: INestApplication;

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({ imports: [IdempotencyTestingModule.forRoot()], providers: [Mailer] }).compile();
    app = moduleRef.createNestApplication();
    app.useLogger(false);
    await app.init();
  });
  afterAll(() => app.close());

  it('runs a task once per task id, returns the cached result to a duplicate, refuses other arguments, retries a failure', async () => {
    const tasks = app.get(TaskClient);
    const first = await tasks.enqueue(Mailer, 'send', ['p-1'], { taskId: 'receipt-p-1' });
    expect(await first.result({ timeout: 5_000 })).toBe('sent p-1');
    const again = await tasks.enqueue(Mailer, 'send', ['p-1'], { taskId: 'receipt-p-1' });
    expect(again.executionId).toBe(first.executionId);
    expect(await again.result()).toBe('sent p-1');
    expect(sent).toBe(1);
    await expect(tasks.enqueue(Mailer, 'send', ['p-2'], { taskId: 'receipt-p-1' })).rejects.toBeInstanceOf(TaskConflictError);
    const failed = await tasks.enqueue(Mailer, 'send', ['bad'], { taskId: 'receipt-bad' });
    await expect(failed.result({ timeout: 5_000 })).rejects.toBeInstanceOf(WorkflowFailedError);
    expect(sent).toBe(3); // attempts: 2
    expect((await tasks.enqueue(Mailer, 'send', ['bad'], { taskId: 'receipt-bad' })).executionId).not.toBe(failed.executionId);
  });

  it('waits for enqueue({ delay }) before running the task, as BullMQ would', async () => {
    const tasks = app.get(TaskClient);
    const later = await tasks.enqueue(Mailer, 'send', ['p-later'], { taskId: 'receipt-later', delay: '2s' });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await later.status()).toBe('pending');
    expect(sentTo.filter((id) => id === 'p-later')).toHaveLength(0);
    expect(await later.result({ timeout: 10_000 })).toBe('sent p-later');
    expect(sentTo.filter((id) => id === 'p-later')).toHaveLength(1);
  });

  it('refuses transaction: true at startup (there is no database)', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [IdempotencyTestingModule.forRoot()], providers: [Ledger] }).compile();
    const refused = moduleRef.createNestApplication({ logger: false });
    await expect(refused.init()).rejects.toThrow(WorkflowDefinitionError);
    await expect(refused.init()).rejects.toThrow(/@Task\(\) on Ledger.write: transaction: true needs the Postgres store/);
    await refused.close().catch(() => undefined);
  });
});
