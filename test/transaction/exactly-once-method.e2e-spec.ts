import { Controller, Injectable, INestApplicationContext, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import {
  currentTransaction, DuplicateExecutionError, IdempotencyConfigError, IdempotencyModule, IdempotencyService, IdempotencyTestingModule,
  Idempotent, IdempotentMethod, InboxService, NotInTransactionError, SkipIdempotency, StoredFailureError, StoreUnavailableError,
} from '../../lib';
import { IdempotencyConnections } from '../../lib/storage/idempotency-connections';
import { IdempotencyCache } from '../../lib/storage/idempotency.cache';
import { activeTransaction } from '../../lib/transaction/current-transaction';
import { gate, sleep, waitUntil } from '../support/resilience';
import { databaseUrl, redisUrl, sql, uniqueSchema } from '../support/test-app';
import { LedgerService } from './fixtures/ledger';
import { appliedTo } from '../support/applied-method-decorator';
import { nodeEntry } from '../support/node-entry';

const ROOT = join(__dirname, '..', '..');

describe('transaction: true on @IdempotentMethod() and IdempotencyService.run()', () => {
  const schema = uniqueSchema('txm');
  let app: INestApplicationContext;
  let ledger: LedgerService;
  let engine: IdempotencyService;

  const rows = async (id: string): Promise<number> =>
    Number((await sql<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".ledger WHERE charge_id = $1`, [id]))[0].n);
  /** Calls blocked in Postgres on another transaction's lock (a duplicate waiting for an uncommitted claim; the suites' servers are their own). */
  const blockedClaims = async (): Promise<number> => Number((await sql<{ n: string }>(
    `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
  ))[0].n);
  /** A process that charges `id` and holds its transaction open (fixtures/ledger-worker.ts). */
  const spawnLedgerWorker = (id: string): { process: ChildProcess; wrote: Promise<unknown>; kill: () => Promise<void> } => {
    const child = spawn(process.execPath, [...nodeEntry(join(__dirname, 'fixtures', 'ledger-worker.ts')), id], {
      cwd: ROOT,
      env: { ...process.env, TEST_SCHEMA: schema, DATABASE_URL: databaseUrl(), REDIS_URL: redisUrl(), TS_NODE_PROJECT: join(ROOT, 'tsconfig.json') },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const lines: string[] = [];
    createInterface({ input: child.stdout }).on('line', (line) => lines.push(line));
    const exited = new Promise((resolve) => child.once('exit', resolve));
    return {
      process: child,
      wrote: waitUntil(`the worker wrote its ledger row (output: ${lines.join(' | ')})`, () => lines.includes(`WROTE ${id}`), { timeoutMs: 60_000 }),
      kill: async () => {
        child.kill('SIGKILL');
        await exited;
      },
    };
  };
  const record = async (key: string): Promise<{ status: string; locked_until: Date | null } | undefined> =>
    (await sql<{ status: string; locked_until: Date | null }>(
      `SELECT status, locked_until FROM "${schema}".idempotency_records WHERE key = $1 ORDER BY id DESC LIMIT 1`, [key],
    ))[0];

  beforeAll(async () => {
    await sql(`CREATE SCHEMA "${schema}"; CREATE TABLE "${schema}".ledger (id serial PRIMARY KEY, charge_id text NOT NULL, amount int NOT NULL)`);
    LedgerService.schema = schema;
    @Module({
      imports: [IdempotencyModule.forRoot({ postgres: { url: databaseUrl(), schema }, redis: { url: redisUrl(), keyPrefix: schema }, migrationsRun: true })],
      providers: [LedgerService],
    })
    class LedgerModule {}
    app = await NestFactory.createApplicationContext(LedgerModule, { logger: false });
    ledger = app.get(LedgerService);
    engine = app.get(IdempotencyService);
  });

  afterAll(async () => {
    await app.close();
  });

  afterEach(() => {
    ledger.hold = () => Promise.resolve();
    jest.restoreAllMocks();
  });

  it('commits the claim, the handler writes and the stored result in one commit', async () => {
    const held = gate();
    let wrote = false;
    ledger.hold = () => ((wrote = true), held.promise);
    const first = ledger.charge('c1', 100);
    await waitUntil('the call wrote', () => wrote);
    // Nothing is visible before the commit, not even the claim.
    expect(await rows('c1')).toBe(0);
    expect(await record('LedgerService.charge:c1')).toBeUndefined();
    // A live holder keeps its transaction past its lease (1 s): it pings it, so the server does not end it.
    await waitUntil('the holder\'s transaction is older than two leases', async () => Number((await sql<{ n: string }>(
      `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND now() - xact_start > interval '2500 ms'`,
    ))[0].n) > 0);
    held.open();
    expect(await first).toEqual({ id: 'c1', amount: 100 });
    expect(await rows('c1')).toBe(1);
    expect((await record('LedgerService.charge:c1'))!.status).toBe('completed');
    expect(await ledger.charge('c1', 100)).toEqual({ id: 'c1', amount: 100 });
    expect(await rows('c1')).toBe(1);
  });

  it('rolls back the writes of a call that throws and releases the key, so a retry runs once', async () => {
    await expect(ledger.charge('c2', 100, 'card declined')).rejects.toThrow('card declined');
    expect(await rows('c2')).toBe(0);
    expect((await record('LedgerService.charge:c2'))!.status).toBe('failed');
    expect(await ledger.charge('c2', 100)).toEqual({ id: 'c2', amount: 100 });
    expect(await rows('c2')).toBe(1);
  });

  it('stores a final failure (onFailure "lock") after rolling back its writes', async () => {
    await expect(ledger.chargeOnce('c3', 100, 'card declined')).rejects.toThrow('card declined');
    await expect(ledger.chargeOnce('c3', 100)).rejects.toBeInstanceOf(StoredFailureError);
    expect(await rows('c3')).toBe(0);
  });

  it('refuses a duplicate of an uncommitted claim at once; onDuplicate "wait" waits for it and gets its result', async () => {
    const held = gate();
    let runs = 0;
    const charge = () => engine.run('w1', async () => {
      runs++;
      await currentTransaction().query(`INSERT INTO "${schema}".ledger (charge_id, amount) VALUES ('w1', 1)`);
      await held.promise;
      return 'charged';
    }, { transaction: true });
    const first = charge();
    await waitUntil('the first call runs', () => runs === 1);
    await expect(charge()).rejects.toBeInstanceOf(DuplicateExecutionError);
    const waiting = engine.run('w1', () => (runs++, 'ran again'), { transaction: true, onDuplicate: 'wait', waitTimeout: '20s' });
    await waitUntil('the duplicate waits for the claim in Postgres', async () => (await blockedClaims()) > 0);
    held.open();
    expect(await first).toBe('charged');
    expect(await waiting).toBe('charged');
    expect(runs).toBe(1);
    expect(await rows('w1')).toBe(1);
  });

  it('gives a waiting duplicate the failure of the claim it waited for (onDuplicate "wait"), and rolls back its writes', async () => {
    const held = gate();
    let runs = 0;
    const first = engine.run('w2', async () => {
      runs++;
      await currentTransaction().query(`INSERT INTO "${schema}".ledger (charge_id, amount) VALUES ('w2', 1)`);
      await held.promise;
      throw new Error('card declined');
    }, { transaction: true });
    await waitUntil('the first call runs', () => runs === 1);
    const waiting = engine.run('w2', () => (runs++, 'ran again'), { transaction: true, onDuplicate: 'wait', waitTimeout: '20s' });
    await waitUntil('the duplicate waits for the claim in Postgres', async () => (await blockedClaims()) > 0);
    held.open();
    await expect(first).rejects.toThrow('card declined');
    await expect(waiting).rejects.toBeInstanceOf(StoredFailureError);
    expect(runs).toBe(1);
    expect(await rows('w2')).toBe(0);
  });

  it('frees the key of a hung holder (process stopped) after one lease of silence: the server ends its transaction', async () => {
    const child = spawnLedgerWorker('c6');
    try {
      await child.wrote;
      child.process.kill('SIGSTOP'); // alive but silent: it stops pinging its transaction
      const retried = await waitUntil('the server ended the silent holder\'s transaction and the retry ran', async () => {
        try {
          return await ledger.charge('c6', 100);
        } catch (err) {
          if (err instanceof DuplicateExecutionError) return undefined;
          throw err;
        }
      }, { timeoutMs: 30_000, intervalMs: 100 });
      expect(retried).toEqual({ id: 'c6', amount: 100 });
    } finally {
      await child.kill();
    }
    expect(await rows('c6')).toBe(1);
  }, 90_000);

  it('leaves nothing of a process killed with SIGKILL between its write and its commit; the retry charges once', async () => {
    const child = spawnLedgerWorker('c5');
    try {
      await child.wrote;
    } finally {
      await child.kill();
    }
    expect(await rows('c5')).toBe(0);
    const retried = await waitUntil('Postgres ended the dead holder\'s transaction and the retry ran', async () => {
      try {
        return await ledger.charge('c5', 100);
      } catch (err) {
        if (err instanceof DuplicateExecutionError) return undefined;
        throw err;
      }
    }, { timeoutMs: 30_000, intervalMs: 100 });
    expect(retried).toEqual({ id: 'c5', amount: 100 });
    expect(await ledger.charge('c5', 100)).toEqual({ id: 'c5', amount: 100 });
    expect(await rows('c5')).toBe(1);
  }, 90_000);

  it('runs IdempotencyService.run() in a transaction of the requested isolation level, read committed by default', async () => {
    const level = await engine.run('iso-1', async () => {
      const [{ transaction_isolation }] = await currentTransaction().query<{ transaction_isolation: string }[]>('SHOW transaction_isolation');
      return transaction_isolation;
    }, { transaction: true, isolation: 'serializable' });
    expect(level).toBe('serializable');
    const defaultLevel = await engine.run('iso-2', async () => {
      const [{ transaction_isolation }] = await currentTransaction().query<{ transaction_isolation: string }[]>('SHOW transaction_isolation');
      return transaction_isolation;
    }, { transaction: true });
    expect(defaultLevel).toBe('read committed');
  });

  it('caches the committed outcome at its first replay, until its expiry; nothing is current afterwards', async () => {
    const cache = app.get(IdempotencyCache);
    const before = Date.now();
    await expect(engine.run('cached-1', () => 'kept', { transaction: true, ttl: '1h' })).resolves.toBe('kept');
    const after = Date.now();
    expect(activeTransaction()).toBeUndefined();
    // A first-time key costs no cache write: most keys are never retried.
    await sleep(200);
    expect(await cache.peek('method:default', 'cached-1')).toBeUndefined();
    // The first duplicate replays from Postgres and caches what it read there.
    let ranAgain = false;
    await expect(engine.run('cached-1', () => (ranAgain = true), { transaction: true, ttl: '1h' })).resolves.toBe('kept');
    expect(ranAgain).toBe(false);
    const cached = await cache.peek('method:default', 'cached-1');
    expect(cached).toMatchObject({ fingerprint: '', result: { ok: true, value: 'kept' } });
    // The expiry is one TTL after the commit (the same machine's clock; a second of slack for rounding).
    expect(cached!.expiresAt).toBeGreaterThanOrEqual(before + 3_600_000 - 1_000);
    expect(cached!.expiresAt).toBeLessThanOrEqual(after + 3_600_000 + 1_000);
  });

  it("tells the DataSource's TypeORM subscribers about the commit, once before and once after it", async () => {
    const events: string[] = [];
    const subscriber = {
      beforeTransactionCommit: () => void events.push('before'),
      afterTransactionCommit: () => void events.push('after'),
    };
    const subscribers = app.get(IdempotencyConnections).dataSource.subscribers;
    subscribers.push(subscriber);
    try {
      await expect(engine.run('subscribed-1', () => 'told', { transaction: true })).resolves.toBe('told');
    } finally {
      subscribers.splice(subscribers.indexOf(subscriber), 1);
    }
    expect(events).toEqual(['before', 'after']);
  });

  it('nests a transactional call inside another as a savepoint: both commit with the outer one', async () => {
    await expect(engine.run('outer-1', async () => {
      await currentTransaction().query(`INSERT INTO "${schema}".ledger (charge_id, amount) VALUES ('n1', 1)`);
      await ledger.charge('n2', 2);
      throw new Error('outer fails');
    }, { transaction: true })).rejects.toThrow('outer fails');
    expect(await rows('n1')).toBe(0);
    expect(await rows('n2')).toBe(0);
  });

  it('refuses currentTransaction() outside a transaction with a named error', async () => {
    expect(() => currentTransaction()).toThrow(NotInTransactionError);
    await expect(engine.run('plain-1', () => currentTransaction())).rejects.toBeInstanceOf(NotInTransactionError);
  });

  it('refuses isolation without transaction, and an unknown isolation level, when the class is loaded', () => {
    expect(appliedTo({ isolation: 'serializable' })).toThrow(/isolation: only applies with transaction: true/);
    expect(appliedTo({ transaction: true, isolation: 'snapshot' as never })).toThrow(/isolation: expected one of "read committed"/);
  });
});

describe('transaction: true without a Postgres store', () => {
  it('fails at startup for http.transaction under IdempotencyTestingModule', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [IdempotencyTestingModule.forRoot({ http: { transaction: true } })] }).compile().catch((err: unknown) => err);
    expect(moduleRef).toBeInstanceOf(IdempotencyConfigError);
    expect((moduleRef as Error).message).toMatch(/http\.transaction: the transactional mode needs Postgres/);
  });

  it('fails at startup under IdempotencyTestingModule for a route with @Idempotent({ transaction: true }), naming it', async () => {
    @Controller()
    class PaymentsController {
      @Post('plain')
      @Idempotent()
      plain(): string {
        return 'ok';
      }

      @Post('pay')
      @Idempotent({ transaction: true })
      pay(): string {
        return 'paid';
      }
    }
    const moduleRef = await Test.createTestingModule({ imports: [IdempotencyTestingModule.forRoot()], controllers: [PaymentsController] }).compile();
    await expect(moduleRef.init()).rejects.toThrow(IdempotencyConfigError);
    await expect(moduleRef.init()).rejects.toThrow(/@Idempotent\(\) on PaymentsController\.pay: transaction: true needs the Postgres store/);
    // Not "Invalid IdempotencyModule options": the testing module's options are fine, the route cannot run there.
    await expect(moduleRef.init()).rejects.toThrow(/^transaction: true cannot work without Postgres:\n/);
  });

  it('starts under IdempotencyTestingModule when a transactional route opts out with @SkipIdempotency()', async () => {
    @Controller()
    @Idempotent({ transaction: true })
    class SkippedController {
      @Post('skipped')
      @SkipIdempotency()
      skipped(): string {
        return 'ok';
      }
    }
    const moduleRef = await Test.createTestingModule({ imports: [IdempotencyTestingModule.forRoot()], controllers: [SkippedController] }).compile();
    await expect(moduleRef.init()).resolves.toBe(moduleRef);
    await moduleRef.close();
  });

  it('fails at startup under IdempotencyTestingModule, naming the method', async () => {
    @Injectable()
    class Payments {
      @IdempotentMethod({ transaction: true })
      async pay(): Promise<void> {}
    }
    const moduleRef = await Test.createTestingModule({ imports: [IdempotencyTestingModule.forRoot()], providers: [Payments] }).compile();
    await expect(moduleRef.init()).rejects.toThrow(IdempotencyConfigError);
    await expect(moduleRef.init()).rejects.toThrow(/@IdempotentMethod\(\) on Payments.pay: transaction: true needs the Postgres store/);
  });
});

describe('currentTransaction() in an InboxService handler', () => {
  const schema = uniqueSchema('txi');
  let app: INestApplicationContext;
  let inbox: InboxService;

  beforeAll(async () => {
    await sql(`CREATE SCHEMA "${schema}"; CREATE TABLE "${schema}".ledger (id serial PRIMARY KEY, charge_id text NOT NULL, amount int NOT NULL)`);
    @Module({ imports: [IdempotencyModule.forRoot({ postgres: { url: databaseUrl(), schema }, redis: false, migrationsRun: true })] })
    class InboxModule {}
    app = await NestFactory.createApplicationContext(InboxModule, { logger: false });
    inbox = app.get(InboxService);
  });

  afterAll(async () => {
    await app.close();
  });

  it('is the handler transaction: its writes roll back with the message id, and a redelivery runs once', async () => {
    const write = () => currentTransaction().query(`INSERT INTO "${schema}".ledger (charge_id, amount) VALUES ('m1', 1)`);
    await expect(inbox.process('m1', 'payments', async (manager) => {
      expect(currentTransaction()).toBe(manager);
      await write();
      throw new Error('handler failed');
    })).rejects.toThrow('handler failed');
    expect(await inbox.process('m1', 'payments', write)).toMatchObject({ status: 'processed' });
    expect(await inbox.process('m1', 'payments', write)).toEqual({ status: 'duplicate' });
    await inbox.processBatch([{ id: 'm2' }], 'payments', (manager) => Promise.resolve(expect(currentTransaction()).toBe(manager)));
    expect((await sql<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".ledger`))[0].n).toBe('1');
  });
});

describe('transactional mode when every pooled connection is busy', () => {
  const schema = uniqueSchema('txp');
  let app: INestApplicationContext;

  beforeAll(async () => {
    @Module({ imports: [IdempotencyModule.forRoot({ postgres: { url: databaseUrl(), schema, poolSize: 2 }, redis: false, migrationsRun: true })] })
    class PoolModule {}
    app = await NestFactory.createApplicationContext(PoolModule, { logger: false });
  });

  afterAll(async () => {
    await app.close();
  });

  it('gives up waiting for a connection after one lease with StoreUnavailableError, claiming nothing; then runs', async () => {
    const engine = app.get(IdempotencyService);
    const pool = app.get(IdempotencyConnections).pool;
    const busy = [await pool.connect(), await pool.connect()];
    let runs = 0;
    try {
      await expect(engine.run('pool-1', () => ++runs, { transaction: true, lockTimeout: '500ms' })).rejects.toBeInstanceOf(StoreUnavailableError);
    } finally {
      for (const client of busy) client.release();
    }
    expect(runs).toBe(0);
    expect(await sql(`SELECT 1 FROM "${schema}".idempotency_records WHERE key = 'pool-1'`)).toEqual([]);
    expect(await engine.run('pool-1', () => ++runs, { transaction: true })).toBe(1);
  });
});
