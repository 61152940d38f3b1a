// A fresh step job checks that its run still holds the workflow job's lock (one Redis read) before it skips the
// Postgres read; the checks of step jobs that start in the same turn share one MGET.
import { INestApplication } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { Step, Workflow } from '../../lib';
import { WorkflowQueues } from '../../lib/workflow/workflow-queues';
import { bootWorkflowApp, scenario } from './support';

@Workflow({ name: 'lock-reads' })
class OneStep {
  async run(): Promise<string> {
    return this.step();
  }

  @Step()
  step(): Promise<string> {
    return Promise.resolve('done');
  }
}

describe('lock checks of fresh step jobs', () => {
  const s = scenario();
  let app: INestApplication;
  let queues: WorkflowQueues;
  let redis: Redis;
  const queue = 'lock-reads';

  beforeAll(async () => {
    ({ app } = await bootWorkflowApp(s, [OneStep]));
    queues = app.get(WorkflowQueues);
    redis = await (queues as unknown as { rawClient(name: string): Promise<Redis> }).rawClient(queue);
  });

  afterAll(async () => {
    await app?.close();
  });

  const restores: Array<() => void> = [];
  afterEach(() => {
    for (const restore of restores.splice(0)) restore();
  });

  /** Records the calls of one command of the client (jest's spies cannot wrap ioredis's command methods), or fails them. */
  function record(command: 'get' | 'mget', fail?: Error): unknown[][] {
    const calls: unknown[][] = [];
    const target = redis as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
    const original = target[command];
    target[command] = (...args: unknown[]) => {
      calls.push(args);
      return fail ? Promise.reject(fail) : original.apply(redis, args);
    };
    restores.push(() => delete target[command]);
    return calls;
  }

  const key = (n: number) => `${s.prefix}:lock-test:wf-${n}:lock`;

  it('answers each check of one turn from a single MGET: held, held by another token, gone', async () => {
    await redis.set(key(1), 'token-1');
    await redis.set(key(2), 'token-2');
    await redis.set(key(3), 'someone-else');
    const mget = record('mget');
    const get = record('get');
    const answers = await Promise.all([
      queues.lockHolds(queue, { key: key(1), token: 'token-1' }),
      queues.lockHolds(queue, { key: key(2), token: 'token-2' }),
      queues.lockHolds(queue, { key: key(3), token: 'token-3' }),
      queues.lockHolds(queue, { key: key(4), token: 'token-4' }),
    ]);
    expect(answers).toEqual([true, true, false, false]);
    expect(mget).toEqual([[key(1), key(2), key(3), key(4)]]);
    expect(get).toEqual([]);
  });

  it('reads a lone check with a GET, and answers false when Redis cannot be asked', async () => {
    const get = record('get');
    expect(await queues.lockHolds(queue, { key: key(1), token: 'token-1' })).toBe(true);
    expect(get).toEqual([[key(1)]]);
    for (const restore of restores.splice(0)) restore();
    const closed = new Error('Connection is closed.');
    record('mget', closed);
    record('get', closed);
    const answers = await Promise.all([
      queues.lockHolds(queue, { key: key(1), token: 'token-1' }),
      queues.lockHolds(queue, { key: key(2), token: 'token-2' }),
    ]);
    expect(answers).toEqual([false, false]);
    expect(await queues.lockHolds(queue, { key: key(1), token: 'token-1' })).toBe(false);
  });
});
