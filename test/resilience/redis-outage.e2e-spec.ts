import { Body, Controller, Headers, INestApplication, Post } from '@nestjs/common';
import Redis from 'ioredis';
import request, { Response } from 'supertest';
import { gate, listen, redisKeys, sleep, waitUntil } from '../support/resilience';
import { removeServiceData, startRedis, StartedRedis, stopRedis } from '../support/services';
import { ADAPTERS, createTestApp, sql, uniqueSchema } from '../support/test-app';

/** Runs per idempotency key, so every assertion is about exactly one key. */
const runs = new Map<string, number>();
const started = new Set<string>();
/** How long the handler takes for a key (set by the test; not part of the request, so not of its fingerprint). */
const delays = new Map<string, number>();
/** Holds the next run of the handler for a key until the test opens it (set by the test, like `delays`; taken by one run). */
const gates = new Map<string, Promise<void>>();

@Controller()
class OrdersController {
  @Post('orders')
  async create(@Headers('idempotency-key') key: string, @Body() body: { item: string }) {
    const n = (runs.get(key) ?? 0) + 1;
    runs.set(key, n);
    started.add(key);
    const delay = delays.get(key);
    if (delay) await sleep(delay);
    const held = gates.get(key);
    gates.delete(key);
    await held;
    return { key, item: body.item, run: n };
  }
}

describe.each(ADAPTERS)('Redis stopped and restarted mid-run (%s)', (adapter) => {
  const name = `resil-redis-${adapter}-${process.pid}`;
  const schema = uniqueSchema('rr');
  const prefix = `idem-${schema}`;
  let redis: StartedRedis | undefined;
  let app: INestApplication;
  let url: string;
  let probe: Redis;
  const first = new Map<string, string>();

  // Keys are per adapter: both adapters share the run counters of this file.
  const k = (key: string) => `${adapter}-${key}`;
  const post = (key: string, item = 'book', delay?: number) => {
    if (delay) delays.set(k(key), delay);
    return request(url).post('/orders').set('Idempotency-Key', k(key)).send({ item });
  };
  const runsOf = (key: string) => runs.get(k(key));

  async function completeOnce(key: string, item = 'book') {
    const res = await post(key, item);
    expect(res.status).toBe(201);
    expect(res.headers['idempotent-replayed']).toBeUndefined();
    first.set(key, res.text);
    return res;
  }

  async function expectReplay(key: string, item = 'book') {
    const res = await post(key, item);
    expect(res.status).toBe(201);
    expect(res.headers['idempotent-replayed']).toBe('true');
    expect(res.text).toBe(first.get(key));
    expect(runsOf(key)).toBe(1);
  }

  beforeAll(async () => {
    redis = await startRedis(name);
    app = await createTestApp({
      adapter,
      schema,
      controllers: [OrdersController],
      options: {
        redis: { url: redis.url, keyPrefix: prefix, commandTimeout: '100ms', breaker: { failureThreshold: 2, resetAfter: '200ms' } },
      },
    });
    url = await listen(app);
    probe = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1, enableOfflineQueue: false, retryStrategy: () => 100 });
    probe.on('error', () => undefined);
    await probe.connect();
  }, 60_000);

  afterAll(async () => {
    await app?.close();
    probe?.disconnect();
    await stopRedis(redis);
    removeServiceData(name);
  });

  it('uses Redis while it is up', async () => {
    await completeOnce('before-1');
    await waitUntil('the completed record is cached in Redis', () => probe.exists(redisKeys(prefix, k('before-1')).record));
    await expectReplay('before-1');
  });

  it('keeps exactly-once and correct replays from Postgres alone after Redis is killed', async () => {
    await stopRedis(redis, 'SIGKILL');
    expect(redis?.proc.signalCode).toBe('SIGKILL');

    // Replay of a key completed before the outage, now answered from Postgres.
    await expectReplay('before-1');

    // New keys run exactly once, and replay.
    for (const key of ['down-1', 'down-2', 'down-3']) {
      await completeOnce(key, key);
      await expectReplay(key, key);
    }

    // 20 concurrent duplicates: one run, everyone else 409 or the replay, never a 5xx.
    const responses = await Promise.all(Array.from({ length: 20 }, () => post('down-storm', 'storm', 300)));
    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s >= 500)).toEqual([]);
    expect(statuses.every((s) => s === 201 || s === 409)).toBe(true);
    expect(runsOf('down-storm')).toBe(1);
    const created = responses.filter((r) => r.status === 201);
    expect(created.length).toBeGreaterThanOrEqual(1);
    expect(new Set(created.map((r) => r.text)).size).toBe(1);
    for (const r of responses.filter((x) => x.status === 409)) {
      expect(r.headers['content-type']).toMatch(/application\/problem\+json/);
      expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    }
    first.set('down-storm', created[0].text);
    await expectReplay('down-storm', 'storm');

    // Postgres holds every one of them once.
    const rows = await sql<{ key: string; status: string }>(
      `SELECT key, status FROM "${schema}".idempotency_records WHERE key = ANY($1) ORDER BY key`,
      [['before-1', 'down-1', 'down-2', 'down-3', 'down-storm'].map(k)],
    );
    expect(rows).toEqual(['before-1', 'down-1', 'down-2', 'down-3', 'down-storm'].map((key) => ({ key: k(key), status: 'completed' })));
  });

  it('goes back to Redis once it is restarted on the same port, and exactly-once still holds', async () => {
    const port = redis!.port;
    redis = await startRedis(name, port);
    expect(redis.port).toBe(port);
    await waitUntil('the probe client reconnects', async () => (await probe.ping()) === 'PONG');

    // The app's client reconnects and the breaker closes: a newly completed key is cached in Redis again.
    let attempt = 0;
    const used = await waitUntil('the app writes to the restarted Redis', async () => {
      const key = `after-${++attempt}`;
      await completeOnce(key, key);
      return (await probe.exists(redisKeys(prefix, k(key)).record)) === 1 ? key : null;
    }, { timeoutMs: 20_000, intervalMs: 100 });
    await expectReplay(used, used);
    for (let i = 1; i <= attempt; i++) expect(runsOf(`after-${i}`)).toBe(1);

    // Keys completed before and during the outage replay the same bytes; their runs do not change.
    for (const key of ['before-1', 'down-1', 'down-2', 'down-3']) await expectReplay(key, key === 'before-1' ? 'book' : key);
    await expectReplay('down-storm', 'storm');
    // A replay answered from Postgres refills the (empty) restarted Redis.
    expect(await probe.exists(redisKeys(prefix, k('down-1')).record)).toBe(1);

    const responses = await Promise.all(Array.from({ length: 20 }, () => post('after-storm', 'storm', 300)));
    expect(responses.every((r) => r.status === 201 || r.status === 409)).toBe(true);
    expect(runsOf('after-storm')).toBe(1);
  });

  it('still runs once when Redis is flushed while the first request is in flight', async () => {
    const key = 'flushed-in-flight';
    // The original stays in flight until every duplicate has been answered.
    const held = gate();
    gates.set(k(key), held.promise);
    const original = post(key, 'flush').then((r) => r);
    let duplicates: Response[] = [];
    try {
      await waitUntil('the handler started', () => started.has(k(key)));
      expect(await probe.exists(redisKeys(prefix, k(key)).marker)).toBe(1);
      await probe.flushall();
      duplicates = await Promise.all(Array.from({ length: 5 }, () => post(key, 'flush')));
    } finally {
      held.open();
    }
    expect(duplicates.map((r) => r.status)).toEqual([409, 409, 409, 409, 409]);
    const res = await original;
    expect(res.status).toBe(201);
    first.set(key, res.text);
    expect(runsOf(key)).toBe(1);
    await expectReplay(key, 'flush');

    // Flushed after completion: the replay comes from Postgres, still the same bytes.
    await probe.flushall();
    await expectReplay(key, 'flush');
    const storm = await Promise.all(Array.from({ length: 10 }, () => post(key, 'flush')));
    expect(storm.every((r) => r.status === 201 && r.text === first.get(key))).toBe(true);
    expect(runsOf(key)).toBe(1);
  });
});
