import { Body, Controller, Headers, INestApplication, Post } from '@nestjs/common';
import Redis from 'ioredis';
import { Client } from 'pg';
import request from 'supertest';
import { listen, redisKeys, waitUntil } from '../support/resilience';
import { startPostgres, StartedPostgres, stopPostgres } from '../support/services';
import { AdapterName, ADAPTERS, createTestApp, databaseUrl, redisUrl, sql, uniqueSchema } from '../support/test-app';

const runs = new Map<string, number>();

@Controller()
class ChargeController {
  @Post('charge')
  charge(@Headers('idempotency-key') key: string, @Body() body: { amount: number }) {
    const run = (runs.get(key) ?? 0) + 1;
    runs.set(key, run);
    return { key, amount: body.amount, run };
  }
}

interface Started {
  app: INestApplication;
  url: string;
  prefix: string;
}

describe('Postgres unavailable when claiming', () => {
  const name = `resil-pg-${process.pid}`;
  let pg: StartedPostgres | undefined;
  const apps = new Map<string, Started>();
  let probe: Redis;

  beforeAll(async () => {
    pg = await startPostgres(name);
    for (const adapter of ADAPTERS) {
      for (const failOpen of [false, true]) {
        const schema = uniqueSchema('pgdown');
        const app = await createTestApp({
          adapter,
          schema,
          controllers: [ChargeController],
          options: { postgres: { url: pg.url, schema }, migrationsRun: true, http: { failOpen } },
        });
        apps.set(`${adapter}:${failOpen}`, { app, url: await listen(app), prefix: `idem-${schema}` });
      }
    }
    probe = new Redis(redisUrl());
    // Everything works while the store is up...
    for (const [id, { url }] of apps) {
      const res = await request(url).post('/charge').set('Idempotency-Key', `warm-${id}`).send({ amount: 1 });
      expect(res.status).toBe(201);
    }
    // ...then the store goes away.
    await stopPostgres(pg);
  }, 120_000);

  afterAll(async () => {
    for (const { app } of apps.values()) await app.close();
    probe?.disconnect();
    await stopPostgres(pg, { removeData: true });
  });

  describe.each(ADAPTERS)('%s', (adapter: AdapterName) => {
    it('fails closed: 503 problem+json with Retry-After, the handler does not run, nothing is left in Redis', async () => {
      const { url, prefix } = apps.get(`${adapter}:false`)!;
      const key = `down-${adapter}-closed`;
      for (let attempt = 0; attempt < 3; attempt++) {
        const res = await request(url).post('/charge').set('Idempotency-Key', key).send({ amount: 5 });
        expect(res.status).toBe(503);
        expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
        expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
        expect(JSON.parse(res.text)).toMatchObject({ status: 503, type: expect.stringContaining('store-unavailable') });
        expect(res.headers['idempotency-unprotected']).toBeUndefined();
      }
      expect(runs.get(key)).toBeUndefined();
      expect(await probe.exists(redisKeys(prefix, key).marker, redisKeys(prefix, key).record)).toBe(0);
    });

    it('without a key the route still works (nothing to protect)', async () => {
      const { url } = apps.get(`${adapter}:false`)!;
      const res = await request(url).post('/charge').send({ amount: 5 });
      expect(res.status).toBe(201);
    });

    it('failOpen: true runs the handler with the store down', async () => {
      const { url } = apps.get(`${adapter}:true`)!;
      const key = `down-${adapter}-open`;
      const res = await request(url).post('/charge').set('Idempotency-Key', key).send({ amount: 5 });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({ key, amount: 5, run: 1 });
      // The response says that it ran without protection.
      expect(res.headers['idempotency-unprotected']).toBe('true');
      expect(runs.get(key)).toBe(1);
    });
  });
});

/** Set by a test: the handler makes the record table refuse completion (via a separate connection) before it answers. */
const sabotage = new Map<string, () => Promise<void>>();
const writeRuns = new Map<string, number>();

@Controller()
class SabotagedController {
  @Post('sabotaged')
  async run(@Headers('idempotency-key') key: string, @Body() body: { amount: number }) {
    const run = (writeRuns.get(key) ?? 0) + 1;
    writeRuns.set(key, run);
    await sabotage.get(key)?.();
    return { key, amount: body.amount, run };
  }
}

describe.each(ADAPTERS)('writing the result fails after the handler succeeded (%s)', (adapter) => {
  const schema = uniqueSchema('wfail');
  const prefix = `idem-${schema}`;
  const table = `"${schema}".idempotency_records`;
  let app: INestApplication;
  let url: string;
  let probe: Redis;

  beforeAll(async () => {
    // A long lease: the retry below must meet it still live however slow the machine is. The test then waits it out:
    // its end (nothing renews it once the first request has answered) is part of what it checks.
    app = await createTestApp({ adapter, schema, controllers: [SabotagedController], options: { http: { lockTimeout: '10s' } } });
    url = await listen(app);
    probe = new Redis(redisUrl());
  });

  afterAll(async () => {
    await sql(`ALTER TABLE ${table} DROP CONSTRAINT IF EXISTS refuse_completion`).catch(() => undefined);
    await app?.close();
    probe?.disconnect();
  });

  it('the client gets 503 problem+json, not a success that would not replay; retries get 409 until the lease ends, then the key is taken over', async () => {
    const key = `wfail-${adapter}`;
    sabotage.set(key, async () => {
      const client = new Client({ connectionString: databaseUrl() });
      await client.connect();
      try {
        // NOT VALID: existing rows are not checked; the completion UPDATE is, and fails.
        await client.query(`ALTER TABLE ${table} ADD CONSTRAINT refuse_completion CHECK (status <> 'completed') NOT VALID`);
      } finally {
        await client.end();
      }
    });
    const send = () => request(url).post('/sabotaged').set('Idempotency-Key', key).send({ amount: 7 });

    const first = await send();
    expect(first.status).toBe(503);
    expect(first.headers['content-type']).toMatch(/application\/problem\+json/);
    expect(first.headers['retry-after']).toBe('1');
    expect(JSON.parse(first.text)).toMatchObject({ status: 503, type: expect.stringContaining('store-unavailable') });
    expect(first.text).not.toContain('"run"');
    sabotage.delete(key);

    // The result was not stored: the record is still in progress under its lease.
    const [row] = await sql<{ status: string; result: unknown }>(`SELECT status, result FROM ${table} WHERE key = $1`, [key]);
    expect(row).toEqual({ status: 'in_progress', result: null });
    await sql(`ALTER TABLE ${table} DROP CONSTRAINT refuse_completion`);

    const retry = await send();
    expect(retry.status).toBe(409);
    expect(retry.headers['content-type']).toMatch(/application\/problem\+json/);
    expect(writeRuns.get(key)).toBe(1);

    // When the lease has ended (Postgres) and the in-flight marker is gone (Redis), a retry takes over and runs.
    // Nothing renews them once the first request has answered: both end by themselves, one lease (10 s) after it.
    await waitUntil('the lease ends', async () => {
      const [r] = await sql<{ passed: boolean }>(`SELECT locked_until <= now() AS passed FROM ${table} WHERE key = $1`, [key]);
      return r.passed;
    }, { timeoutMs: 30_000 });
    await waitUntil('the in-flight marker expires', async () => (await probe.exists(redisKeys(prefix, key).marker)) === 0, { timeoutMs: 30_000 });
    const after = await send();
    expect(after.status).toBe(201);
    expect(after.body).toEqual({ key, amount: 7, run: 2 });
    const replay = await send();
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(after.text);
    expect(writeRuns.get(key)).toBe(2);
  }, 90_000);
});
