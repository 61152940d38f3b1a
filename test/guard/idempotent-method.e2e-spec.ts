import { INestApplicationContext, Injectable, Logger, Module, Scope } from '@nestjs/common';
import { NestFactory, Reflector } from '@nestjs/core';
import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import {
  DuplicateExecutionError, IdempotencyConfigError, IdempotencyKeyReusedError, IdempotencyModule, IdempotencyService,
  IdempotentMethod, KeyDerivationError, ResultNotStoredError, StoredFailureError,
} from '../../lib';
import { databaseUrl, redisUrl, sql, uniqueSchema } from '../support/test-app';
import { AUDITED, InvoiceService } from './fixtures/invoices';
import { appliedTo } from '../support/applied-method-decorator';
import { countHeldKeyAnswers } from '../support/held-key-answers';
import { nodeEntry } from '../support/node-entry';

const ROOT = join(__dirname, '..', '..');

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe.each([
  ['Redis + Postgres', true],
  ['Postgres alone', false],
])('@IdempotentMethod (%s)', (_label, withRedis) => {
  let app: INestApplicationContext;
  let service: InvoiceService;
  let engine: IdempotencyService;
  const schema = uniqueSchema('guard');

  const runs = async (label: string): Promise<number> =>
    Number((await sql<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".runs WHERE label = $1`, [label]))[0].n);

  beforeAll(async () => {
    await sql(`CREATE SCHEMA "${schema}"; CREATE TABLE "${schema}".runs (id serial PRIMARY KEY, label text NOT NULL)`);
    InvoiceService.schema = schema;
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          postgres: { url: databaseUrl(), schema },
          redis: withRedis ? { url: redisUrl(), keyPrefix: schema } : false,
          migrationsRun: true,
        }),
      ],
      providers: [InvoiceService],
    })
    class GuardModule {}
    app = await NestFactory.createApplicationContext(GuardModule, { logger: false });
    service = app.get(InvoiceService);
    engine = app.get(IdempotencyService);
  });

  afterAll(async () => {
    await service.pool.end();
    await app.close();
  });

  beforeEach(() => {
    service.gate = Promise.resolve();
  });

  it('runs once per argument list and gives duplicates the stored result', async () => {
    const first = await service.createInvoice('u1', 100);
    const again = await service.createInvoice('u1', 100);
    const other = await service.createInvoice('u1', 200);
    expect(first).toEqual({ invoice: 'inv-u1-100', amount: 100 });
    expect(again).toEqual(first);
    expect(other).toEqual({ invoice: 'inv-u1-200', amount: 200 });
    expect(await runs('invoice:u1')).toBe(2);
  });

  it('keeps other decorators metadata on the guarded method', () => {
    expect(app.get(Reflector).get(AUDITED, service.createInvoice)).toBe(true);
  });

  it('treats argument objects with reordered keys as the same call', async () => {
    const call = (service as unknown as { createInvoice: (...a: unknown[]) => Promise<unknown> }).createInvoice.bind(service);
    const a = await call('u-ord', { b: 2, a: 1 });
    const b = await call('u-ord', { a: 1, b: 2 });
    expect(b).toEqual(a);
    expect(await runs('invoice:u-ord')).toBe(1);
  });

  it('uses a custom key function and raises DuplicateExecutionError on duplicates when asked to', async () => {
    expect(await service.ship('o1', 'first')).toBe('shipped-o1');
    const duplicate = service.ship('o1', 'a different note, same key');
    await expect(duplicate).rejects.toBeInstanceOf(DuplicateExecutionError);
    await expect(duplicate).rejects.toMatchObject({ key: 'InvoiceService.ship:ship-o1', status: 'completed' });
    expect(await runs('ship:o1')).toBe(1);
  });

  it('tells an in-flight duplicate that the first call is still running', async () => {
    const gate = deferred();
    service.gate = gate.promise;
    const first = service.createInvoice('u-flight', 5);
    await waitFor(async () => (await runs('invoice:u-flight')) === 1);
    await expect(service.createInvoice('u-flight', 5)).rejects.toMatchObject({ name: 'DuplicateExecutionError', status: 'in_progress' });
    gate.resolve();
    await expect(first).resolves.toEqual({ invoice: 'inv-u-flight-5', amount: 5 });
    expect(await service.createInvoice('u-flight', 5)).toEqual({ invoice: 'inv-u-flight-5', amount: 5 });
    expect(await runs('invoice:u-flight')).toBe(1);
  });

  it('onDuplicate wait: concurrent callers wait for the first and share its result', async () => {
    const gate = deferred();
    service.gate = gate.promise;
    const calls = Array.from({ length: 10 }, () => service.settle('b1'));
    await waitFor(async () => (await runs('settle:b1')) === 1);
    gate.resolve();
    const results = await Promise.all(calls);
    expect(results).toEqual(Array.from({ length: 10 }, () => ({ settled: 'b1' })));
    expect(await runs('settle:b1')).toBe(1);
  });

  it('onDuplicate wait gives up after waitTimeout with DuplicateExecutionError', async () => {
    const gate = deferred();
    service.gate = gate.promise;
    const first = service.slowSettle('b2');
    await waitFor(async () => (await runs('slow:b2')) === 1);
    await expect(service.slowSettle('b2')).rejects.toMatchObject({ name: 'DuplicateExecutionError', status: 'in_progress' });
    gate.resolve();
    await expect(first).resolves.toBe('b2');
    expect(await runs('slow:b2')).toBe(1);
  });

  it('onFailure unlock (default): a failure releases the key and the retry runs', async () => {
    service.failures = 1;
    await expect(service.flaky('f1')).rejects.toThrow('card network timeout');
    expect(await service.flaky('f1')).toBe('ok-f1');
    expect(await service.flaky('f1')).toBe('ok-f1');
    expect(await runs('flaky:f1')).toBe(2);
  });

  it('onFailure lock: the failure is final and rethrown to every duplicate', async () => {
    await expect(service.rejectCard('c1')).rejects.toBeInstanceOf(TypeError);
    const duplicate = service.rejectCard('c1');
    await expect(duplicate).rejects.toBeInstanceOf(StoredFailureError);
    await expect(duplicate).rejects.toMatchObject({ originalName: 'TypeError', message: 'card c1 declined', key: expect.any(String) });
    expect(await runs('reject:c1')).toBe(1);
  });

  it('guards synchronous methods too (they become async)', async () => {
    const before = service.sums;
    await expect(service.sum(2, 3)).resolves.toBe(5);
    await expect(service.sum(2, 3)).resolves.toBe(5);
    expect(service.sums - before).toBe(1);
  });

  it('onDuplicate wait: when the first call fails, the waiters get its error instead of running again', async () => {
    const gate = deferred();
    service.gate = gate.promise;
    const before = service.attempts;
    // A call whose first claim lands after the failure released the key is a retry, and runs: the gate opens only
    // once the four duplicates have each met the held key.
    const heldAnswers = countHeldKeyAnswers(engine);
    const calls = Array.from({ length: 5 }, () => service.chargeOnce('w-1'));
    await waitFor(() => Promise.resolve(service.attempts - before === 1 && heldAnswers.count() >= 4));
    heldAnswers.stop();
    gate.resolve();
    const outcomes = await Promise.allSettled(calls);
    expect(outcomes.every((o) => o.status === 'rejected')).toBe(true);
    const errors = outcomes.map((o) => (o as PromiseRejectedResult).reason as Error);
    expect(errors.filter((e) => e instanceof StoredFailureError)).toHaveLength(4);
    expect(errors.every((e) => e.message === 'card w-1 declined by the network')).toBe(true);
    expect(service.attempts - before).toBe(1);
    // The failure unlocked the key: a later retry runs.
    service.gate = Promise.resolve();
    await expect(service.chargeOnce('w-1')).rejects.toThrow('declined');
    expect(service.attempts - before).toBe(2);
  });

  it('refuses arguments it cannot turn into a key, naming the fix', async () => {
    const call = service.createInvoice as unknown as (...a: unknown[]) => Promise<unknown>;
    await expect(call.call(service, 'u', () => 1)).rejects.toBeInstanceOf(KeyDerivationError);
    await expect(call.call(service, 'u', 10n)).rejects.toThrow(/InvoiceService\.createInvoice.*pass \{ key/);
  });

  it('does not store a result with no JSON form: the caller gets it, duplicates get ResultNotStoredError', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const result = (await service.connection('x1')) as { id: string };
    expect(result.id).toBe('x1');
    await expect(service.connection('x1')).rejects.toBeInstanceOf(ResultNotStoredError);
    expect(await runs('conn:x1')).toBe(1);
    warn.mockRestore();
  });

  it('extends the lease of a long call, so a duplicate never takes it over while it runs', async () => {
    // The call holds once its run is recorded until the test lets it go: still running when the duplicate comes,
    // however slow the machine.
    const held = deferred();
    const record = service.recordRun.bind(service);
    const holding = jest.spyOn(service, 'recordRun').mockImplementationOnce(async (label) => {
      await record(label);
      await held.promise;
    });
    try {
      const long = service.longJob('l1', 0); // lockTimeout is 2s
      await waitFor(async () => (await runs('long:l1')) === 1);
      // Past the lease it was claimed with: only its renewal keeps the key.
      await new Promise((resolve) => setTimeout(resolve, 2500));
      await expect(service.longJob('l1', 10)).rejects.toMatchObject({ name: 'DuplicateExecutionError', status: 'in_progress' });
      held.resolve();
      await expect(long).resolves.toBe('done-l1');
      expect(await runs('long:l1')).toBe(1);
    } finally {
      held.resolve();
      holding.mockRestore();
    }
  });

  it('IdempotencyService.run: keyed calls, with fingerprint mismatch refused', async () => {
    let count = 0;
    const fn = () => Promise.resolve(++count);
    expect(await engine.run('direct-1', fn, { scope: 'svc', fingerprint: 'a' })).toBe(1);
    expect(await engine.run('direct-1', fn, { scope: 'svc', fingerprint: 'a' })).toBe(1);
    await expect(engine.run('direct-1', fn, { scope: 'svc', fingerprint: 'b' })).rejects.toBeInstanceOf(IdempotencyKeyReusedError);
    expect(await engine.run('direct-1', fn, { scope: 'other' })).toBe(2);
    expect(count).toBe(2);
  });

  it('IdempotencyService.run rejects invalid options with a named error', async () => {
    await expect(engine.run('bad', () => 1, { ttl: 'soon' })).rejects.toThrow(/ttl: "soon" is not a duration/);
  });

  describe('across processes', () => {
    const children: ChildProcess[] = [];
    afterAll(() => {
      for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    });

    /** A worker process calling longJob(id, ms); with 'hold', its call holds the key once its run is recorded until release(). */
    function startWorker(id: string, ms: number | 'hold'): { child: ChildProcess; output: () => string; exited: Promise<number | null>; release: () => void } {
      const child = spawn(process.execPath, [...nodeEntry(join(__dirname, 'fixtures', 'guard-worker.ts')), id, String(ms)], {
        cwd: ROOT,
        env: { ...process.env, TEST_SCHEMA: schema, DATABASE_URL: databaseUrl(), REDIS_URL: redisUrl(), TS_NODE_PROJECT: join(ROOT, 'tsconfig.json') },
        stdio: ['pipe', 'pipe', 'inherit'],
      });
      children.push(child);
      let out = '';
      child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()));
      child.stdin?.on('error', () => undefined);
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      return { child, output: () => out, exited, release: () => child.stdin?.end('release\n') };
    }

    it('two processes calling with the same key run it once', async () => {
      const worker = startWorker('p1', 'hold');
      await waitFor(async () => (await runs('long:p1')) === 1, 30_000);
      await expect(service.longJob('p1', 10)).rejects.toMatchObject({ name: 'DuplicateExecutionError', status: 'in_progress' });
      worker.release();
      expect(await worker.exited).toBe(0);
      expect(worker.output()).toContain('result done-p1');
      expect(await service.longJob('p1', 10)).toBe('done-p1');
      expect(await runs('long:p1')).toBe(1);
    }, 60_000);

    it('a holder killed with SIGKILL is taken over once its lease expires', async () => {
      const worker = startWorker('p2', 60_000);
      await waitFor(async () => (await runs('long:p2')) === 1, 30_000);
      worker.child.kill('SIGKILL');
      await worker.exited;
      let result: string | undefined;
      await waitFor(async () => {
        try {
          result = await service.longJob('p2', 10);
          return true;
        } catch (err) {
          if (err instanceof DuplicateExecutionError) return false;
          throw err;
        }
      }, 20_000);
      expect(result).toBe('done-p2');
      expect(await runs('long:p2')).toBe(2);
    }, 60_000);
  });
});

describe('@IdempotentMethod on a request-scoped provider', () => {
  it('fails at bootstrap, naming the class and the fix, instead of silently not guarding', async () => {
    @Injectable({ scope: Scope.REQUEST })
    class PerRequest {
      @IdempotentMethod()
      async act(): Promise<number> {
        return Promise.resolve(1);
      }
    }
    @Module({ imports: [IdempotencyModule.forRoot({ postgres: { url: databaseUrl(), schema: uniqueSchema('scoped') }, redis: false, migrationsRun: true })], providers: [PerRequest] })
    class ScopedModule {}
    await expect(NestFactory.createApplicationContext(ScopedModule, { logger: false, abortOnError: false })).rejects.toThrow(
      /@IdempotentMethod\(\) on PerRequest\.act: PerRequest is request-scoped or transient/,
    );
  });
});

describe('@IdempotentMethod options', () => {
  it('fails when the class is loaded, naming each bad option', () => {
    expect(appliedTo({ ttl: 'later', onDuplicate: 'ignore' as never })).toThrow(IdempotencyConfigError);
    expect(appliedTo({ ttl: 'later', onDuplicate: 'ignore' as never })).toThrow(/ttl: "later" is not a duration[\s\S]*onDuplicate: expected one of return, raise, wait/);
    expect(appliedTo({ onFailure: 'retry' as never })).toThrow(/@IdempotentMethod\(\) on Payments\.pay: onFailure/);
    expect(appliedTo({ key: 'fixed' as never })).toThrow(/key: expected a function/);
  });
});

async function waitFor(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
