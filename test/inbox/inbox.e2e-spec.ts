import { INestApplicationContext, Module } from '@nestjs/common';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { NestFactory } from '@nestjs/core';
import { IdempotencyConfigError, IdempotencyModule, InboxService, TransactionAbortedError } from '../../lib';
import { IdempotencyConnections } from '../../lib/storage/idempotency-connections';
import { databaseUrl, sql, uniqueSchema } from '../support/test-app';
import { nodeEntry } from '../support/node-entry';

describe('InboxService', () => {
  const schema = uniqueSchema('inbox');
  let app: INestApplicationContext;
  let inbox: InboxService;

  const effects = async (): Promise<string[]> =>
    (await sql<{ message_id: string }>(`SELECT message_id FROM "${schema}".effects ORDER BY id`)).map((r) => r.message_id);

  beforeAll(async () => {
    @Module({ imports: [IdempotencyModule.forRoot({ postgres: { url: databaseUrl(), schema }, redis: false, migrationsRun: true })] })
    class InboxModule {}
    app = await NestFactory.createApplicationContext(InboxModule, { logger: false });
    inbox = app.get(InboxService);
    await sql(`CREATE TABLE "${schema}".effects (id serial PRIMARY KEY, message_id text NOT NULL)`);
  });

  afterAll(() => app.close());
  beforeEach(() => sql(`TRUNCATE "${schema}".effects, "${schema}".inbox_messages`));

  const recordEffect = (id: string) => (manager: import('typeorm').EntityManager) =>
    manager.query<unknown>(`INSERT INTO "${schema}".effects (message_id) VALUES ($1) RETURNING id`, [id]);

  it('processes a message once and reports later deliveries as duplicates', async () => {
    const first = await inbox.process('evt-1', 'payments', recordEffect('evt-1'));
    const again = await inbox.process('evt-1', 'payments', recordEffect('evt-1'));
    expect(first.status).toBe('processed');
    expect(again).toEqual({ status: 'duplicate' });
    expect(await effects()).toEqual(['evt-1']);
  });

  it('keeps consumers apart: the same id is new for another consumer', async () => {
    await inbox.process('evt-2', 'payments', recordEffect('evt-2'));
    const other = await inbox.process('evt-2', 'analytics', recordEffect('evt-2'));
    expect(other.status).toBe('processed');
    expect(await effects()).toEqual(['evt-2', 'evt-2']);
  });

  it('rolls back the id with the handler on failure, so a redelivery runs again', async () => {
    await expect(
      inbox.process('evt-3', 'payments', async (manager) => {
        await recordEffect('evt-3')(manager);
        throw new Error('handler crashed after writing');
      }),
    ).rejects.toThrow('handler crashed after writing');
    expect(await effects()).toEqual([]);
    expect(await sql(`SELECT * FROM "${schema}".inbox_messages`)).toEqual([]);
    const redelivery = await inbox.process('evt-3', 'payments', recordEffect('evt-3'));
    expect(redelivery.status).toBe('processed');
    expect(await effects()).toEqual(['evt-3']);
  });

  it('runs concurrent deliveries of one message exactly once', async () => {
    const outcomes = await Promise.all(
      Array.from({ length: 10 }, () =>
        inbox.process('evt-4', 'payments', async (manager) => {
          await recordEffect('evt-4')(manager);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }),
      ),
    );
    expect(outcomes.filter((o) => o.status === 'processed')).toHaveLength(1);
    expect(outcomes.filter((o) => o.status === 'duplicate')).toHaveLength(9);
    expect(await effects()).toEqual(['evt-4']);
  });

  it('hands the processed result back', async () => {
    const outcome = await inbox.process('evt-5', 'payments', () => Promise.resolve({ credited: 42 }));
    expect(outcome).toEqual({ status: 'processed', result: { credited: 42 } });
  });

  it('processes only the new messages of a batch, in one transaction', async () => {
    await inbox.process('b-2', 'batch', recordEffect('b-2'));
    const batch = [{ id: 'b-1' }, { id: 'b-2' }, { id: 'b-3' }, { id: 'b-1' }];
    const seen: string[][] = [];
    const outcome = await inbox.processBatch(batch, 'batch', async (manager, fresh) => {
      seen.push(fresh.map((m) => m.id));
      for (const m of fresh) await recordEffect(m.id)(manager);
      return fresh.length;
    });
    expect(seen).toEqual([['b-1', 'b-3']]);
    expect(outcome.processed.map((m) => m.id)).toEqual(['b-1', 'b-3']);
    expect(outcome.duplicates.map((m) => m.id)).toEqual(['b-2', 'b-1']);
    expect(outcome.result).toBe(2);
    expect(await effects()).toEqual(['b-2', 'b-1', 'b-3']);

    const replay = await inbox.processBatch(batch, 'batch', () => Promise.reject(new Error('must not run')));
    expect(replay.processed).toEqual([]);
    expect(replay.result).toBeUndefined();
  });

  it('rolls back a whole batch when its handler fails', async () => {
    const batch = [{ key: 'x-1' }, { key: 'x-2' }];
    await expect(
      inbox.processBatch(batch, 'batch', () => Promise.reject(new Error('boom')), (m) => m.key),
    ).rejects.toThrow('boom');
    const retry = await inbox.processBatch(batch, 'batch', () => Promise.resolve('ok'), (m) => m.key);
    expect(retry.processed).toHaveLength(2);
  });

  // Postgres answers the COMMIT of an aborted transaction with a silent ROLLBACK: reported as processed, the message
  // would be acknowledged with nothing of it committed, its id included.
  it('refuses a handler that caught a failed statement and returned: nothing committed, so the message is not processed', async () => {
    const swallowing = async (manager: import('typeorm').EntityManager) => {
      await recordEffect('evt-6')(manager);
      await manager.query('SELECT 1 / 0').catch(() => undefined);
      return 'looks fine';
    };
    const refused = await inbox.process('evt-6', 'payments', swallowing).then(() => undefined, (err: unknown) => err);
    expect(refused).toBeInstanceOf(TransactionAbortedError);
    expect((refused as Error).message).toMatch(/savepoint/);
    expect(((refused as Error).cause as { code?: string }).code).toBe('22012'); // the statement that failed: division by zero
    expect(await effects()).toEqual([]);
    expect(await sql(`SELECT * FROM "${schema}".inbox_messages`)).toEqual([]);
    const redelivery = await inbox.process('evt-6', 'payments', recordEffect('evt-6'));
    expect(redelivery.status).toBe('processed');
    expect(await effects()).toEqual(['evt-6']);

    const batch = await inbox.processBatch([{ key: 'evt-7' }], 'batch', (manager) => swallowing(manager), (m) => m.key)
      .then(() => undefined, (err: unknown) => err);
    expect(batch).toBeInstanceOf(TransactionAbortedError);
    expect(await effects()).toEqual(['evt-6']);
    expect(await sql(`SELECT consumer, message_id FROM "${schema}".inbox_messages`)).toEqual([{ consumer: 'payments', message_id: 'evt-6' }]);
  });

  it('lets a handler recover from a failed statement inside a savepoint, as the error says', async () => {
    const outcome = await inbox.process('evt-8', 'payments', async (manager) => {
      await recordEffect('evt-8')(manager);
      await manager.transaction((inner) => inner.query<unknown[]>('SELECT 1 / 0')).catch(() => undefined);
      return 'recovered';
    });
    expect(outcome).toEqual({ status: 'processed', result: 'recovered' });
    expect(await effects()).toEqual(['evt-8']);
  });

  it('never deadlocks when concurrent batches hold the same ids in opposite orders', async () => {
    // Without a canonical lock order, each transaction holds half of the ids the other one needs: 40P01.
    const ids = Array.from({ length: 400 }, (_, i) => ({ id: `dl-${String(i).padStart(4, '0')}` }));
    const reversed = [...ids].reverse();
    // A deadlock would be run again in place (see own-conflicts.e2e-spec): count the transactions, one per batch.
    const transactions = jest.spyOn(app.get(IdempotencyConnections).dataSource, 'createQueryRunner');
    for (let round = 0; round < 15; round++) {
      const consumer = `deadlock-${round}`;
      const outcomes = await Promise.allSettled([
        inbox.processBatch(ids, consumer, (_manager, fresh) => Promise.resolve(fresh.length)),
        inbox.processBatch(reversed, consumer, (_manager, fresh) => Promise.resolve(fresh.length)),
        inbox.processBatch([...ids.slice(200), ...ids.slice(0, 200)], consumer, (_manager, fresh) => Promise.resolve(fresh.length)),
      ]);
      const failures = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected').map((o) => String(o.reason));
      expect(failures).toEqual([]);
      const processed = outcomes.map((o) => (o as PromiseFulfilledResult<{ processed: unknown[] }>).value.processed.length);
      expect(processed.reduce((a, b) => a + b, 0)).toBe(ids.length);
    }
    expect(transactions).toHaveBeenCalledTimes(15 * 3);
    transactions.mockRestore();
  });

  it('leaves no trace of a consumer killed with SIGKILL mid-handler, so the redelivery runs', async () => {
    const root = join(__dirname, '..', '..');
    const child = spawn(process.execPath, [...nodeEntry(join(__dirname, 'fixtures', 'inbox-worker.ts')), 'evt-crash'], {
      cwd: root,
      env: { ...process.env, TEST_SCHEMA: schema, TS_NODE_PROJECT: join(root, 'tsconfig.json') },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise((resolve) => child.on('exit', resolve));
    try {
      await new Promise<void>((resolve, reject) => {
        child.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('inside') && resolve());
        child.on('exit', (code) => reject(new Error(`worker exited early with ${code}`)));
      });
      child.kill('SIGKILL');
      await exited;
      const redelivery = await inbox.process('evt-crash', 'crash-test', recordEffect('evt-crash'));
      expect(redelivery.status).toBe('processed');
      expect(await effects()).toEqual(['evt-crash']);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  }, 60_000);

  it('refuses an empty message id or consumer with a clear error', async () => {
    await expect(inbox.process('', 'payments', () => Promise.resolve())).rejects.toBeInstanceOf(IdempotencyConfigError);
    await expect(inbox.process('evt', '', () => Promise.resolve())).rejects.toThrow(/inbox consumer/);
  });
});
