// Issue 9 (first-time keys): the response goes out once Postgres holds the outcome; the Redis write that follows
// (record in, in-flight marker out) is sent but not waited for. Redis is reached through a proxy that can hold
// what the app sends: with the cache write held, the client still gets its response, the outcome is already in
// Postgres, and once Redis has it a retry replays from it without running the handler again.
import { Controller, Headers, Post } from '@nestjs/common';
import Redis from 'ioredis';
import { createServer, Server, Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { Gate, Harness, Runs, startApp } from '../support/http-harness';
import { redisKeys, waitUntil } from '../support/resilience';
import { ADAPTERS, redisUrl, sql } from '../support/test-app';

@Controller('orders')
class OrdersController {
  constructor(private readonly runs: Runs, private readonly gate: Gate) {}

  @Post()
  async create(@Headers('idempotency-key') key: string) {
    const run = this.runs.inc(key);
    await this.gate.pass();
    return { key, run };
  }
}

/** A TCP proxy to Redis that, while held, keeps what clients send (in order) instead of forwarding it. */
class HoldableProxy {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private held: [Socket, Buffer][] | undefined;

  constructor(private readonly target: URL) {
    this.server = createServer((client) => {
      const upstream = new Socket();
      upstream.connect(Number(this.target.port), this.target.hostname);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('error', () => undefined);
        s.on('close', () => this.sockets.delete(s));
      }
      client.on('data', (chunk) => (this.held ? this.held.push([upstream, chunk]) : upstream.write(chunk)));
      upstream.pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `redis://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  hold(): void {
    this.held ??= [];
  }

  /** Chunks held so far (each client write arrives as one or more chunks). */
  get heldChunks(): number {
    return this.held?.length ?? 0;
  }

  release(): void {
    const held = this.held ?? [];
    this.held = undefined;
    for (const [upstream, chunk] of held) upstream.write(chunk);
  }

  close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

describe.each(ADAPTERS)('a first-time key is answered once Postgres holds it, not once Redis does (%s)', (adapter) => {
  let h: Harness;
  let proxy: HoldableProxy;
  let probe: Redis;
  const prefix = `idem-held-${adapter}-${process.pid}`;

  beforeAll(async () => {
    proxy = new HoldableProxy(new URL(redisUrl()));
    const url = await proxy.listen();
    // A long command timeout: a response that waited for the held cache write would wait for all of it.
    h = await startApp({ adapter, controllers: [OrdersController], options: { redis: { url, keyPrefix: prefix, commandTimeout: '60s' } } });
    probe = new Redis(redisUrl());
  });
  afterAll(async () => {
    proxy?.release();
    await h?.close();
    await proxy?.close();
    const leftover = await probe?.keys(`${prefix}:*`);
    if (leftover?.length) await probe.del(...leftover);
    probe?.disconnect();
  });

  it('sends the response while the cache write is held; a retry replays once Redis has it', async () => {
    const key = `held-cache-${adapter}`;
    h.gate.reset();
    const first = h.http().post('/orders').set('Idempotency-Key', key).send({ amount: 1 }).then((r) => r);
    await h.gate.started;
    proxy.hold();
    h.gate.open();

    const response = await first;
    expect(response.status).toBe(201);
    expect(response.body).toEqual({ key, run: 1 });
    const [row] = await sql<{ status: string }>(`SELECT status FROM "${h.schema}".idempotency_records WHERE key = $1`, [key]);
    expect(row).toEqual({ status: 'completed' });
    const { record } = redisKeys(prefix, key);
    expect(await probe.exists(record)).toBe(0); // the cache write is still held

    proxy.release();
    await waitUntil('Redis holds the record', async () => (await probe.exists(record)) === 1);
    const retry = await h.http().post('/orders').set('Idempotency-Key', key).send({ amount: 1 });
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.text).toBe(response.text);
    expect(h.runs(key)).toBe(1);
  }, 30_000);

  it('a retry sent right after the response replays, even while Redis has not cached the write\'s script yet', async () => {
    // Redis restarted or flushed its scripts: the request's lookup loads its own script again, and the cache write
    // after it must still reach Redis before any command sent later on the same connection (a write that first
    // failed on an unknown script and was sent again would land after the retry's lookup: a 409 for a done key).
    const key = `flushed-scripts-${adapter}`;
    await probe.script('FLUSH');
    h.gate.reset();
    const first = h.http().post('/orders').set('Idempotency-Key', key).send({ amount: 1 }).then((r) => r);
    await h.gate.started;
    proxy.hold();
    h.gate.open();
    const response = await first;
    expect(response.status).toBe(201);
    const writes = proxy.heldChunks;
    const retry = h.http().post('/orders').set('Idempotency-Key', key).send({ amount: 1 }).then((r) => r);
    await waitUntil('the retry\'s lookup is sent after the cache write', () => proxy.heldChunks > writes);
    proxy.release();
    const replay = await retry;
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(response.text);
    expect(h.runs(key)).toBe(1);
  }, 30_000);
});
