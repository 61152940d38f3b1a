// SEMANTICS §1 lines 11–12 (concurrent duplicates, wait mode) and 15 (TTL), with Redis and on Postgres alone.
import { Body, Controller, Injectable, Post } from '@nestjs/common';
import Redis from 'ioredis';
import { Response } from 'supertest';
import { Idempotent, IdempotencyModuleOptions } from '../../lib';
import { expectProblem, Harness, Runs, sleep, startApp } from '../support/http-harness';
import { redisKeys, waitUntil } from '../support/resilience';
import { ADAPTERS, redisUrl, sql } from '../support/test-app';

const N = 50;
const HANDLER_MS = 200;

/** A side effect outside the library: one row per handler run, in the test's schema. */
@Injectable()
class Ledger {
  table = '';

  async record(key: string, run: number): Promise<void> {
    await sql(`INSERT INTO ${this.table} (key, run) VALUES ($1, $2)`, [key, run]);
  }
}

@Controller()
class PaymentController {
  constructor(private readonly runs: Runs, private readonly ledger: Ledger) {}

  @Post('pay')
  async pay(@Body() body: { key: string; amount: number }) {
    const run = this.runs.inc('pay');
    await this.ledger.record(body.key, run);
    await sleep(HANDLER_MS);
    return { run, amount: body.amount, at: Date.now() };
  }

  @Post('pay-wait')
  @Idempotent({ wait: '5s' })
  async payWait(@Body() body: { key: string; amount: number }) {
    const run = this.runs.inc('payWait');
    await this.ledger.record(body.key, run);
    await sleep(HANDLER_MS);
    return { run, amount: body.amount, at: Date.now() };
  }

  /** Long enough that the replays before its end cannot miss it on a loaded machine; the test waits for its end. */
  @Post('short-lived')
  @Idempotent({ ttl: '5s' })
  shortLived(@Body() body: unknown) {
    return { run: this.runs.inc('shortLived'), body };
  }
}

async function startWithLedger(adapter: (typeof ADAPTERS)[number], options: Partial<IdempotencyModuleOptions>): Promise<Harness> {
  const h = await startApp({ adapter, controllers: [PaymentController], providers: [Ledger], options });
  const table = `"${h.schema}".ledger`;
  await sql(`CREATE TABLE ${table} (id serial PRIMARY KEY, key text NOT NULL, run int NOT NULL)`);
  h.app.get(Ledger).table = table;
  return h;
}

async function ledgerRows(h: Harness, key: string): Promise<number> {
  const rows = await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "${h.schema}".ledger WHERE key = $1`, [key]);
  return rows[0].n;
}

function storm(h: Harness, path: string, key: string): Promise<Response[]> {
  return Promise.all(Array.from({ length: N }, () => h.http().post(path).set('Idempotency-Key', key).send({ key, amount: 42 }).then((r) => r)));
}

/** Checks the outcome of a storm against one key: one run, one original, replays of it, or 409s with Retry-After. */
function expectOneRun(responses: Response[], { allowConflicts }: { allowConflicts: boolean }): Response {
  expect(responses.filter((r) => r.status >= 500)).toEqual([]);
  const originals = responses.filter((r) => r.status === 201 && r.headers['idempotent-replayed'] === undefined);
  expect(originals).toHaveLength(1);
  const original = originals[0];
  for (const r of responses) {
    if (r === original) continue;
    if (r.status === 409 && allowConflicts) {
      expectProblem(r, 409);
      expect(r.headers['retry-after']).toMatch(/^\d+$/);
      expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(r.headers['idempotent-replayed']).toBeUndefined();
    } else {
      expect(r.status).toBe(201);
      expect(r.headers['idempotent-replayed']).toBe('true');
      expect(r.text).toBe(original.text);
    }
  }
  return original;
}

const STORES: [string, Partial<IdempotencyModuleOptions>][] = [
  ['Redis + Postgres', {}],
  ['Postgres alone', { redis: false }],
];

describe.each(ADAPTERS)('concurrency and expiry (%s)', (adapter) => {
  describe.each(STORES)('%s', (_store, storeOptions) => {
    let h: Harness;
    /** Reads the Redis cache, when the store has one. */
    let probe: Redis | undefined;
    beforeAll(async () => {
      h = await startWithLedger(adapter, storeOptions);
      if (storeOptions.redis !== false) probe = new Redis(redisUrl());
    });
    afterAll(async () => {
      probe?.disconnect();
      await h.close();
    });

    it(`${N} concurrent requests with one key: exactly one run; the rest replay or get 409 with Retry-After`, async () => {
      const key = 'storm-1';
      const responses = await storm(h, '/pay', key);
      const original = expectOneRun(responses, { allowConflicts: true });
      expect(h.runs('pay')).toBe(1);
      expect(await ledgerRows(h, key)).toBe(1);
      expect((await h.records(key)).map((r) => r.status)).toEqual(['completed']);

      // Once the first has finished, a duplicate gets the replay.
      const later = await h.http().post('/pay').set('Idempotency-Key', key).send({ key, amount: 42 });
      expect(later.status).toBe(201);
      expect(later.headers['idempotent-replayed']).toBe('true');
      expect(later.text).toBe(original.text);
      expect(h.runs('pay')).toBe(1);
    });

    it(`a route with wait: '5s' holds all ${N - 1} duplicates and replays the one result`, async () => {
      const key = 'storm-wait-route';
      const responses = await storm(h, '/pay-wait', key);
      expectOneRun(responses, { allowConflicts: false });
      expect(responses.filter((r) => r.headers['idempotent-replayed'] === 'true')).toHaveLength(N - 1);
      expect(h.runs('payWait')).toBe(1);
      expect(await ledgerRows(h, key)).toBe(1);
    });

    it('two concurrent storms on different keys run once each', async () => {
      const before = h.runs('pay');
      const [a, b] = await Promise.all([storm(h, '/pay', 'storm-a'), storm(h, '/pay', 'storm-b')]);
      const originalA = expectOneRun(a, { allowConflicts: true });
      const originalB = expectOneRun(b, { allowConflicts: true });
      expect(originalA.text).not.toBe(originalB.text);
      expect(h.runs('pay')).toBe(before + 2);
      expect(await ledgerRows(h, 'storm-a')).toBe(1);
      expect(await ledgerRows(h, 'storm-b')).toBe(1);
    });

    it('after the TTL the key is new again', async () => {
      const first = await h.http().post('/short-lived').set('Idempotency-Key', 'ttl-same').send({ v: 1 });
      const otherFirst = await h.http().post('/short-lived').set('Idempotency-Key', 'ttl-other').send({ v: 1 });
      expect(first.status).toBe(201);
      expect(otherFirst.status).toBe(201);
      const replay = await h.http().post('/short-lived').set('Idempotency-Key', 'ttl-same').send({ v: 1 });
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(h.runs('shortLived')).toBe(2);

      // The TTL runs out: both records are past their expiry in Postgres, and gone from the Redis cache.
      await waitUntil('both records expired', async () => {
        const [row] = await sql<{ expired: number }>(
          `SELECT count(*) FILTER (WHERE expires_at <= now())::int AS expired FROM "${h.schema}".idempotency_records WHERE key IN ('ttl-same', 'ttl-other')`,
        );
        if (row.expired !== 2) return false;
        return !probe || (await probe.exists(redisKeys(`idem-${h.schema}`, 'ttl-same').record, redisKeys(`idem-${h.schema}`, 'ttl-other').record)) === 0;
      }, { intervalMs: 100 });

      const again = await h.http().post('/short-lived').set('Idempotency-Key', 'ttl-same').send({ v: 1 });
      expect(again.status).toBe(201);
      expect(again.headers['idempotent-replayed']).toBeUndefined();
      expect(again.text).not.toBe(first.text);
      // An expired record is absent: another body with the old key is a new request, not a reuse (422).
      const otherBody = await h.http().post('/short-lived').set('Idempotency-Key', 'ttl-other').send({ v: 2 });
      expect(otherBody.status).toBe(201);
      expect(otherBody.headers['idempotent-replayed']).toBeUndefined();
      expect(h.runs('shortLived')).toBe(4);

      // The new record replays in its turn.
      const replayAgain = await h.http().post('/short-lived').set('Idempotency-Key', 'ttl-same').send({ v: 1 });
      expect(replayAgain.headers['idempotent-replayed']).toBe('true');
      expect(replayAgain.text).toBe(again.text);
      expect(h.runs('shortLived')).toBe(4);
    });
  });

  describe.each(STORES)("module-level http.wait: '5s' (%s)", (_store, storeOptions) => {
    let h: Harness;
    beforeAll(async () => {
      h = await startWithLedger(adapter, { ...storeOptions, http: { wait: '5s' } });
    });
    afterAll(() => h.close());

    it(`all ${N} concurrent requests get 201 with the same body; one run, one ledger row`, async () => {
      const key = 'storm-wait-module';
      const responses = await storm(h, '/pay', key);
      const original = expectOneRun(responses, { allowConflicts: false });
      expect(responses.every((r) => r.status === 201 && r.text === original.text)).toBe(true);
      expect(h.runs('pay')).toBe(1);
      expect(await ledgerRows(h, key)).toBe(1);
      expect((await h.records(key)).map((r) => r.status)).toEqual(['completed']);
    });
  });
});
