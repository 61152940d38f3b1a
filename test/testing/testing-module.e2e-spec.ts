import { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  IdempotencyConfigError, IdempotencyService, IdempotencyTestingModule, IdempotencyTestingOptions, InboxService, NoDatabaseInTestModeError,
  RetentionService, Step, StepTimeoutError, Workflow, WorkflowCancelledError, WorkflowClient, WorkflowFailedError,
} from '../../lib';
import { gate, waitUntil } from '../support/resilience';

/** Steps a test holds or fails at will. */
const control = { hold: gate(), slow: gate(), failSecond: false, runs: [] as string[] };

@Workflow({ name: 'inline-steps', retention: '0' })
class EphemeralWorkflow {
  async run(input: { n: number }): Promise<number> {
    return this.add(input.n, 1);
  }

  @Step()
  async add(a: number, b: number): Promise<number> {
    return Promise.resolve(a + b);
  }
}

@Workflow({ name: 'inline-control' })
class ControlWorkflow {
  async run(input: { id: string }): Promise<string[]> {
    const first = await this.first(input.id);
    const second = await this.second(input.id);
    return [first, second];
  }

  @Step()
  async first(id: string): Promise<string> {
    control.runs.push(`first:${id}`);
    await control.hold.promise;
    return `first:${id}`;
  }

  @Step()
  async second(id: string): Promise<string> {
    control.runs.push(`second:${id}`);
    if (control.failSecond) throw new Error('second failed');
    return Promise.resolve(`second:${id}`);
  }
}

@Workflow({ name: 'inline-timeout' })
class SlowWorkflow {
  async run(): Promise<string> {
    return this.slow();
  }

  @Step({ timeout: 50 })
  async slow(): Promise<string> {
    await control.slow.promise;
    return 'too late';
  }
}

/** Every timer API but the date stays real, so the engine's own timers keep running. */
const ONLY_DATE_FAKED: NonNullable<Extract<Parameters<typeof jest.useFakeTimers>[0], { doNotFake?: unknown }>['doNotFake']> = [
  'hrtime', 'nextTick', 'performance', 'queueMicrotask', 'setImmediate', 'clearImmediate', 'setInterval', 'clearInterval', 'setTimeout', 'clearTimeout',
];

/** Fails every attempt, with a backoff far longer than any test. */
@Workflow({ name: 'inline-backoff' })
class BackoffWorkflow {
  static attempts = 0;

  async run(): Promise<void> {
    await this.retried();
  }

  @Step({ attempts: 3, backoff: 600_000 })
  async retried(): Promise<void> {
    BackoffWorkflow.attempts++;
    return Promise.reject(new Error('down'));
  }
}

async function boot(options?: IdempotencyTestingOptions): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({
    imports: [IdempotencyTestingModule.forRoot(options)],
    providers: [EphemeralWorkflow, ControlWorkflow, SlowWorkflow, BackoffWorkflow],
  }).compile();
  const app = moduleRef.createNestApplication();
  app.useLogger(false);
  await app.init();
  return app;
}

describe('IdempotencyTestingModule', () => {
  let app: INestApplication;

  beforeAll(async () => {
    app = await boot({ retention: { default: '0' } });
  });

  afterAll(async () => {
    control.hold.open();
    control.slow.open();
    await app?.close();
  });

  it('rejects options it cannot honour, naming them, and validates the rest like IdempotencyModule', async () => {
    await expect(boot({ redis: { url: 'redis://x' } } as unknown as IdempotencyTestingOptions)).rejects.toThrow(/redis: not an option of IdempotencyTestingModule/);
    await expect(boot({ http: { ttl: 'soon' } })).rejects.toBeInstanceOf(IdempotencyConfigError);
    // Module options that would be silently ignored in process are refused too, naming what is taken instead.
    await expect(boot({ retention: { cleanupInterval: '1m' } } as IdempotencyTestingOptions)).rejects.toThrow(/retention\.cleanupInterval: means nothing/);
    await expect(boot({ workflows: { queuePrefix: 'x' } } as IdempotencyTestingOptions)).rejects.toThrow(/workflows\.queuePrefix: .*maxRecoveryAttempts/);
  });

  it('each testing module has its own state', async () => {
    const other = await boot();
    try {
      await app.get(IdempotencyService).run('shared-key', () => 'first app');
      await expect(other.get(IdempotencyService).run('shared-key', () => 'second app')).resolves.toBe('second app');
    } finally {
      await other.close();
    }
  });

  it('time is Date.now(): a fake clock that only moves the date expires a TTL without waiting', async () => {
    const service = app.get(IdempotencyService);
    const runs: string[] = [];
    await service.run('clocked', () => runs.push('first'), { ttl: '1h' });
    jest.useFakeTimers({ doNotFake: ONLY_DATE_FAKED, now: Date.now() });
    try {
      await service.run('clocked', () => runs.push('replayed?'), { ttl: '1h' });
      jest.setSystemTime(Date.now() + 2 * 3_600_000);
      await service.run('clocked', () => runs.push('after the TTL'), { ttl: '1h' });
    } finally {
      jest.useRealTimers();
    }
    expect(runs).toEqual(['first', 'after the TTL']);
  });

  it('closing the app does not wait for a step\'s next attempt, and starts none', async () => {
    const closing = await boot({ workflows: { lockDuration: '1h' } });
    await closing.get(WorkflowClient).start(BackoffWorkflow, undefined);
    await waitUntil('the first attempt ran', () => BackoffWorkflow.attempts === 1);
    await closing.close(); // would hang until the test times out if shutdown waited for the retry
    expect(BackoffWorkflow.attempts).toBe(1);
  });

  it('inbox: a failed handler records nothing, so the redelivery runs; a concurrent redelivery waits and is a duplicate', async () => {
    const inbox = app.get(InboxService);
    await expect(inbox.process('m-1', 'c', () => Promise.reject(new Error('rolled back')))).rejects.toThrow('rolled back');
    const held = gate();
    const first = inbox.process('m-1', 'c', async () => {
      await held.promise;
      return 'first';
    });
    const second = inbox.process('m-1', 'c', () => Promise.resolve('second'));
    held.open();
    await expect(first).resolves.toEqual({ status: 'processed', result: 'first' });
    await expect(second).resolves.toEqual({ status: 'duplicate' });

    const batch = await inbox.processBatch([{ id: 'm-1' }, { id: 'm-2' }, { id: 'm-2' }], 'c', (_manager, fresh) => Promise.resolve(fresh.length));
    expect(batch).toEqual({ processed: [{ id: 'm-2' }], duplicates: [{ id: 'm-1' }, { id: 'm-2' }], result: 1 });
  });

  it('inbox: a handler that uses its EntityManager is told there is no database', async () => {
    const outcome = app.get(InboxService).process('m-db', 'c', (manager) => manager.query('SELECT 1'));
    await expect(outcome).rejects.toBeInstanceOf(NoDatabaseInTestModeError);
  });

  it('retention: cleanup() removes released records; retention 0 removes an execution when it finishes', async () => {
    const service = app.get(IdempotencyService);
    await expect(service.run('fails', () => Promise.reject(new Error('nope')))).rejects.toThrow('nope');
    const report = await app.get(RetentionService).cleanup();
    expect(report?.records).toBe(1);

    const client = app.get(WorkflowClient);
    const handle = await client.start(EphemeralWorkflow, { n: 41 });
    await waitUntil('the finished execution is removed', async () => (await client.list({ workflow: EphemeralWorkflow })).length === 0);
    await expect(client.steps(handle.executionId)).resolves.toEqual([]);
  });

  it('workflows: cancel stops before the next step; resume continues from the checkpoints and reruns only the failure', async () => {
    const client = app.get(WorkflowClient);
    const handle = await client.start(ControlWorkflow, { id: 'a' }, { workflowId: 'control-a' });
    await waitUntil('the first step runs', () => control.runs.includes('first:a'));
    expect(await client.cancel('control-a')).toBe(true);
    control.failSecond = true;
    control.hold.open();
    await expect(handle.result()).rejects.toBeInstanceOf(WorkflowCancelledError);
    // The running step finishes and is checkpointed after the status turned cancelled (result() may answer first).
    await waitUntil('the running step is checkpointed', async () => (await client.steps(handle.executionId)).length > 0);
    expect((await client.steps(handle.executionId)).map((s) => s.name)).toEqual(['first']);

    const resumed = await client.resume<string[]>('control-a');
    await expect(resumed.result()).rejects.toBeInstanceOf(WorkflowFailedError);
    control.failSecond = false;
    const again = await client.resume<string[]>('control-a');
    await expect(again.result()).resolves.toEqual(['first:a', 'second:a']);
    expect(control.runs).toEqual(['first:a', 'second:a', 'second:a']);
  });

  it('workflows: a step past its timeout is checkpointed as failed with StepTimeoutError and fails the workflow', async () => {
    const handle = await app.get(WorkflowClient).start(SlowWorkflow, undefined);
    await expect(handle.result()).rejects.toMatchObject({ error: { name: 'StepFailedError', message: expect.stringContaining('slow') } });
    const [step] = await app.get(WorkflowClient).steps(handle.executionId);
    expect(step).toMatchObject({ name: 'slow', status: 'failed', error: { name: StepTimeoutError.name } });
  });
});
