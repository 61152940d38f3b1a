import { Body, Controller, HttpException, INestApplication, Post } from '@nestjs/common';
import { Client } from 'pg';
import request from 'supertest';
import { IdempotencyService, Idempotent } from '../../lib';
import { idempotencySql } from '../../lib/storage/postgres/idempotency.sql';
import { ADAPTERS, createTestApp, databaseUrl, redisUrl, sql, uniqueSchema } from '../support/test-app';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs the store's own claim statement on a connection of the test's, inside a transaction it controls. */
async function claimInTransaction(schema: string, key: string, fingerprint: string): Promise<{ client: Client; rows: unknown[] }> {
  const client = new Client({ connectionString: databaseUrl() });
  await client.connect();
  await client.query('BEGIN');
  const { claim } = idempotencySql(schema);
  const { rows } = await client.query(claim.text, ['svc', key, fingerprint, '00000000-0000-4000-8000-000000000001', 30_000, 60_000]);
  return { client, rows };
}

describe('claims racing on one key (store only, redis: false)', () => {
  const schema = uniqueSchema('race');
  let app: INestApplication;
  let engine: IdempotencyService;
  const table = `"${schema}".idempotency_records`;

  beforeAll(async () => {
    app = await createTestApp({ adapter: 'express', schema, controllers: [], options: { redis: false } });
    engine = app.get(IdempotencyService);
  });
  afterAll(() => app.close());

  const req = (key: string, fingerprint = 'fp') => ({ scope: 'svc', key, fingerprint, leaseMs: 30_000, ttlMs: 60_000 });

  it('a claim that loses the race after the winner completed gets the replay, not 409 (line 12)', async () => {
    const winner = await claimInTransaction(schema, 'won', 'fp');
    expect(winner.rows).toEqual([expect.objectContaining({ outcome: 'acquired' })]);
    await winner.client.query(`UPDATE ${table} SET status = 'completed', result = '{"paid":true}', locked_until = NULL WHERE key = 'won'`);
    const loser = engine.begin(req('won'));
    await sleep(200); // the loser now waits on the winner's uncommitted row
    await winner.client.query('COMMIT');
    await winner.client.end();
    await expect(loser).resolves.toMatchObject({ kind: 'replay', record: { result: { paid: true } } });
  });

  it('a claim racing the takeover of an expired record never replays the expired response (line 15)', async () => {
    await sql(`INSERT INTO ${table} (scope, key, fingerprint, status, expires_at, completed_at, result)
               VALUES ('svc', 'stale', 'fp', 'completed', now() - interval '1 minute', now() - interval '2 minutes', '{"old":"response"}')`);
    const first = await claimInTransaction(schema, 'stale', 'fp');
    expect(first.rows).toEqual([expect.objectContaining({ outcome: 'acquired' })]);
    const second = engine.begin(req('stale'));
    await sleep(200);
    await first.client.query('COMMIT');
    await first.client.end();
    const outcome = await second;
    expect(outcome.kind).toBe('in_progress');
    expect(JSON.stringify(outcome)).not.toContain('old');
  });

  it('a handler running past its TTL keeps its key while its lease is live', async () => {
    const short = { ...req('long-runner'), ttlMs: 200, leaseMs: 30_000 };
    const begun = await engine.begin(short);
    expect(begun.kind).toBe('acquired');
    await sleep(400); // the TTL has passed, the lease has not
    expect(await engine.begin(short)).toMatchObject({ kind: 'in_progress' });
    expect(await engine.begin({ ...short, fingerprint: 'other' })).toEqual({ kind: 'mismatch' });
    if (begun.kind === 'acquired') await engine.release(begun.claim);
  });

  it('accepts TTLs and leases longer than 24.8 days (no int overflow)', async () => {
    const long = { ...req('thirty-days'), ttlMs: 30 * 86_400_000, leaseMs: 30 * 86_400_000 };
    const begun = await engine.begin(long);
    expect(begun.kind).toBe('acquired');
    if (begun.kind !== 'acquired') return;
    expect(await engine.complete(begun.claim, { ok: 1 })).toBe(true);
    const [row] = await sql<{ days: string }>(`SELECT round(extract(epoch FROM expires_at - created_at) / 86400) AS days FROM ${table} WHERE key = 'thirty-days'`);
    expect(Number(row.days)).toBe(30);
  });
});

let runs = 0;
@Controller()
class FlakyController {
  @Post('teapot')
  @Idempotent({ retryableStatuses: [418] })
  teapot() {
    runs++;
    throw new HttpException({ message: 'try again', run: runs }, 418);
  }

  @Post('outage')
  @Idempotent({ storeServerErrors: true })
  outage(@Body() body: { n: number }) {
    runs++;
    throw new HttpException({ message: 'upstream said no', n: body.n, run: runs }, 502);
  }
}

describe.each(ADAPTERS)('configurable final outcomes (%s)', (adapter) => {
  let app: INestApplication;
  beforeAll(async () => {
    app = await createTestApp({ adapter, controllers: [FlakyController] });
  });
  afterAll(() => app.close());

  it('retryableStatuses releases the key for the listed statuses', async () => {
    const before = runs;
    const a = await request(app.getHttpServer()).post('/teapot').set('Idempotency-Key', 'tea').send({});
    const b = await request(app.getHttpServer()).post('/teapot').set('Idempotency-Key', 'tea').send({});
    expect([a.status, b.status]).toEqual([418, 418]);
    expect(b.headers['idempotent-replayed']).toBeUndefined();
    expect(runs - before).toBe(2);
  });

  it('storeServerErrors makes a 5xx final and replayed', async () => {
    const before = runs;
    const a = await request(app.getHttpServer()).post('/outage').set('Idempotency-Key', 'down').send({ n: 1 });
    const b = await request(app.getHttpServer()).post('/outage').set('Idempotency-Key', 'down').send({ n: 1 });
    expect([a.status, b.status]).toEqual([502, 502]);
    expect(b.text).toBe(a.text);
    expect(b.headers['idempotent-replayed']).toBe('true');
    expect(runs - before).toBe(1);
  });
});

let served = 0;
@Controller()
class ReplayController {
  @Post('served')
  serve(@Body() body: { v: string }) {
    served++;
    return { v: body.v, served };
  }
}

describe('Redis as the cache in front of Postgres', () => {
  it('answers replays from Redis without touching Postgres (line 18)', async () => {
    const schema = uniqueSchema('cache');
    const app = await createTestApp({ adapter: 'express', schema, controllers: [ReplayController] });
    try {
      const first = await request(app.getHttpServer()).post('/served').set('Idempotency-Key', 'r-1').send({ v: 'x' });
      await sql(`ALTER TABLE "${schema}".idempotency_records RENAME TO idempotency_records_away`);
      try {
        const replay = await request(app.getHttpServer()).post('/served').set('Idempotency-Key', 'r-1').send({ v: 'x' });
        expect(replay.status).toBe(201);
        expect(replay.text).toBe(first.text);
        expect(replay.headers['idempotent-replayed']).toBe('true');
        const servedBefore = served;
        const fresh = await request(app.getHttpServer()).post('/served').set('Idempotency-Key', 'r-2').send({ v: 'y' });
        // A new key needs Postgres, whose table is gone: refused (a schema error, not an outage, so 500 rather than 503).
        expect(fresh.status).toBe(500);
        expect(served).toBe(servedBefore);
      } finally {
        await sql(`ALTER TABLE "${schema}".idempotency_records_away RENAME TO idempotency_records`);
      }
    } finally {
      await app.close();
    }
  });

  it('never replays a response another database schema holds, with one shared Redis and no keyPrefix', async () => {
    const make = (schema: string) =>
      createTestApp({ adapter: 'express', schema, controllers: [ReplayController], options: { redis: { url: redisUrl() } } });
    const a = await make(uniqueSchema('iso'));
    const b = await make(uniqueSchema('iso'));
    try {
      const fromA = await request(a.getHttpServer()).post('/served').set('Idempotency-Key', 'shared-key').send({ v: 'a' });
      const fromB = await request(b.getHttpServer()).post('/served').set('Idempotency-Key', 'shared-key').send({ v: 'a' });
      expect(fromA.status).toBe(201);
      expect(fromB.status).toBe(201);
      expect(fromB.headers['idempotent-replayed']).toBeUndefined();
      expect(fromB.text).not.toBe(fromA.text);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('keeps scopes apart even when a scope or key contains the separator', async () => {
    const schema = uniqueSchema('sep');
    const app = await createTestApp({ adapter: 'express', schema, controllers: [] });
    try {
      const engine = app.get(IdempotencyService);
      const one = { scope: 'tenant|evil', key: 'order-1', fingerprint: 'f', leaseMs: 10_000, ttlMs: 60_000 };
      const two = { scope: 'tenant', key: 'evil|order-1', fingerprint: 'f', leaseMs: 10_000, ttlMs: 60_000 };
      const begun = await engine.begin(one);
      if (begun.kind !== 'acquired') throw new Error('expected to acquire');
      await engine.complete(begun.claim, { secret: 'for tenant|evil' });
      expect((await engine.begin(two)).kind).toBe('acquired');
    } finally {
      await app.close();
    }
  });
});
