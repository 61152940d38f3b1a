// Issue 16 item 23: Postgres restarts between the handler's end and the completion write. The response is held
// while the write is retried; the client gets its success only once it is stored (so every retry replays it), or
// 503 problem+json when it could not be stored within one lease. A client never sees two different successes.
import { Controller, Headers, INestApplication, Logger, Post } from '@nestjs/common';
import Redis from 'ioredis';
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import request from 'supertest';
import { listen, redisKeys, waitUntil } from '../support/resilience';
import { startPostgres, StartedPostgres, stopPostgres } from '../support/services';
import { AdapterName, ADAPTERS, createTestApp, redisUrl, uniqueSchema } from '../support/test-app';
import { TcpProxy } from '../workflow/tcp-proxy';

jest.setTimeout(120_000); // real Postgres restarts; every wait is bounded by waitUntil

/** Per key: what the handler does after its work and before it answers (here: stop Postgres). */
const afterWork = new Map<string, () => Promise<void>>();
const runs = new Map<string, number>();
/** The library's error lines (the apps log nothing else): a failed expectation shows why a response was a 503. */
const errorLines: string[] = [];

@Controller()
class ChargeController {
  @Post('charge')
  async charge(@Headers('idempotency-key') key: string) {
    const run = (runs.get(key) ?? 0) + 1;
    runs.set(key, run);
    await afterWork.get(key)?.();
    return { key, run, charge: randomUUID() };
  }
}

describe('Postgres restarts between the handler and the completion write', () => {
  const name = `resil-complete-${process.pid}`;
  let pg: StartedPostgres | undefined;
  let proxy: TcpProxy;
  let proxyUrl: string;
  let probe: Redis;
  const apps: { app: INestApplication; url: string; schema: string; adapter: AdapterName; leaseMs: number }[] = [];

  beforeAll(async () => {
    jest.spyOn(Logger.prototype, 'error').mockImplementation((message: unknown) => void errorLines.push(String(message)));
    pg = await startPostgres(name);
    proxy = new TcpProxy(Number(new URL(pg.url).port));
    proxyUrl = `postgres://postgres@127.0.0.1:${await proxy.listen()}/postgres`;
    probe = new Redis(redisUrl());
    for (const adapter of ADAPTERS) {
      for (const lockTimeout of ['30s', '2s']) {
        const schema = uniqueSchema('cmpl');
        const app = await createTestApp({
          adapter, schema, controllers: [ChargeController],
          options: { postgres: { url: proxyUrl, schema, poolSize: 2 }, migrationsRun: true, http: { lockTimeout } },
        });
        apps.push({ app, url: await listen(app), schema, adapter, leaseMs: lockTimeout === '2s' ? 2000 : 30_000 });
      }
    }
  });

  afterAll(async () => {
    for (const { app } of apps) await app.close();
    probe?.disconnect();
    await proxy?.close();
    await stopPostgres(pg, { removeData: true });
  });

  async function restartPostgres(): Promise<void> {
    pg = await startPostgres(name); // same data directory, new port: the proxy keeps the address the apps use
    proxy.retarget(Number(new URL(pg.url).port));
  }

  async function query<T>(text: string, values: unknown[]): Promise<T[]> {
    const client = new Client({ connectionString: proxyUrl });
    await client.connect();
    try {
      return (await client.query(text, values)).rows as T[];
    } finally {
      await client.end();
    }
  }

  function appFor(adapter: AdapterName, leaseMs: number) {
    return apps.find((a) => a.adapter === adapter && a.leaseMs === leaseMs)!;
  }

  describe.each(ADAPTERS)('%s', (adapter) => {
    it('Postgres back within the lease: the success is sent once it is stored, and every retry replays it', async () => {
      const { url, schema } = appFor(adapter, 30_000);
      const key = `back-${adapter}`;
      let handlerDone = false;
      afterWork.set(key, async () => {
        await stopPostgres(pg); // fast shutdown: every connection is cut; the completion write is next
        handlerDone = true;
      });
      let restarted = false;
      let answeredAfterRestart: boolean | undefined;
      const pending = request(url).post('/charge').set('Idempotency-Key', key).send({ amount: 5 }).then((res) => {
        answeredAfterRestart = restarted;
        return res;
      });
      await waitUntil('the handler finished and Postgres is down', () => handlerDone);
      afterWork.delete(key);
      await restartPostgres();
      restarted = true;

      const first = await pending;
      expect(answeredAfterRestart).toBe(true);
      expect({ status: first.status, errors: errorLines.filter((line) => line.includes(key)) }).toEqual({ status: 201, errors: [] });
      expect(JSON.parse(first.text)).toMatchObject({ key, run: 1 });
      const [row] = await query<{ status: string }>(`SELECT status FROM "${schema}".idempotency_records WHERE key = $1`, [key]);
      expect(row.status).toBe('completed');

      const retry = await request(url).post('/charge').set('Idempotency-Key', key).send({ amount: 5 });
      expect(retry.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(retry.text).toBe(first.text);
      expect(runs.get(key)).toBe(1);
    });

    it('Postgres still down after the lease: 503 problem+json instead of a success; the next success is the only one', async () => {
      const { url, schema } = appFor(adapter, 2000);
      const key = `down-${adapter}`;
      afterWork.set(key, () => stopPostgres(pg));
      const first = await request(url).post('/charge').set('Idempotency-Key', key).send({ amount: 5 });
      afterWork.delete(key);
      expect(first.status).toBe(503);
      expect(errorLines.filter((line) => line.includes(key))).toEqual([expect.stringContaining('could not store the response')]);
      expect(first.headers['content-type']).toMatch(/application\/problem\+json/);
      expect(first.headers['retry-after']).toBe('1');
      expect(JSON.parse(first.text)).toMatchObject({ status: 503, type: expect.stringContaining('store-unavailable') });
      expect(runs.get(key)).toBe(1);

      await restartPostgres();
      // The first run's claim was never completed: once its lease and in-flight marker lapse, a retry takes over.
      await waitUntil('the lease lapses', async () => {
        const [r] = await query<{ passed: boolean }>(`SELECT locked_until <= now() AS passed FROM "${schema}".idempotency_records WHERE key = $1`, [key]);
        return r?.passed;
      });
      await waitUntil('the in-flight marker lapses', async () => (await probe.exists(redisKeys(`idem-${schema}`, key).marker)) === 0);
      const second = await request(url).post('/charge').set('Idempotency-Key', key).send({ amount: 5 });
      expect(second.status).toBe(201);
      expect(JSON.parse(second.text)).toMatchObject({ key, run: 2 });
      const replay = await request(url).post('/charge').set('Idempotency-Key', key).send({ amount: 5 });
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(second.text);
      expect(runs.get(key)).toBe(2);
    });
  });
});
