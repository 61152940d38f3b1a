import { INestApplicationContext, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Queue } from 'bullmq';
import { Client } from 'pg';
import { IdempotencyModule, OutboxDelivery, OutboxHandler, OutboxOptions, OutboxService } from '../../lib';
import { IdempotencyConnections } from '../../lib/storage/idempotency-connections';
import { databaseUrl, uniqueSchema } from '../support/test-app';
import { removeServiceData, startPostgres, StartedPostgres, StartedRedis, startRedis, stopPostgres, stopRedis } from '../support/services';
import { TcpProxy } from '../workflow/tcp-proxy';
import { eventually } from './support';

jest.setTimeout(150_000);

const MESSAGES = 2000;
const KEYS = 20;

@Injectable()
class Receiver {
  readonly received: { id: string; key: string; n: number }[] = [];

  @OutboxHandler('evt')
  async handle(delivery: OutboxDelivery): Promise<void> {
    const { key, n } = delivery.payload as { key: string; n: number };
    this.received.push({ id: delivery.id, key, n });
    await new Promise((resolve) => setTimeout(resolve, 2)); // keep the relay mid-stream
  }
}

async function boot(url: string, schema: string, outbox: OutboxOptions, redis: { url: string } | false): Promise<INestApplicationContext> {
  @Module({
    imports: [IdempotencyModule.forRoot({ postgres: { url, schema, poolSize: 6 }, redis, migrationsRun: true, outbox, retention: { cleanupInterval: false } })],
    providers: [Receiver],
  })
  class RestartModule {}
  return NestFactory.createApplicationContext(RestartModule, { logger: false });
}

async function query<T>(url: string, text: string): Promise<T[]> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(text)).rows as T[];
  } finally {
    await c.end();
  }
}

async function publishAll(app: INestApplicationContext, topic: string): Promise<void> {
  const outbox = app.get(OutboxService);
  const dataSource = app.get(IdempotencyConnections).dataSource;
  for (let i = 0; i < MESSAGES; i += 500) {
    const chunk = Array.from({ length: 500 }, (_, j) => ({ key: `k${(i + j) % KEYS}`, n: Math.floor((i + j) / KEYS) }));
    await dataSource.transaction((m) => outbox.publish(m, chunk.map((p) => ({ topic, key: p.key, payload: p }))));
  }
}

describe('outbox relay through restarts', () => {
  let app: INestApplicationContext | undefined;
  let pg: StartedPostgres | undefined;
  let proxy: TcpProxy | undefined;
  let redis: StartedRedis | undefined;

  afterEach(async () => {
    await app?.close();
    app = undefined;
    await proxy?.close();
    await stopPostgres(pg, { removeData: true });
    await stopRedis(redis);
    removeServiceData(`outbox-redisrestart-${process.pid}`);
    pg = undefined;
    redis = undefined;
  });

  it('Postgres restarted mid-relay: every message is delivered afterwards, each key in order', async () => {
    pg = await startPostgres(`outbox-pgrestart-${process.pid}`);
    proxy = new TcpProxy(Number(new URL(pg.url).port));
    const url = `postgres://postgres@127.0.0.1:${await proxy.listen()}/postgres`;
    const schema = uniqueSchema('obpg');
    app = await boot(url, schema, { topics: { evt: { to: 'handler' } }, relay: { pollInterval: 200, batchSize: 20 }, backoff: { delay: 50 } }, false);
    await publishAll(app, 'evt');
    const receiver = app.get(Receiver);
    await eventually(() => receiver.received.length >= 200, 'the relay mid-stream');
    await stopPostgres(pg); // every connection is cut, including the relay's transactions and its LISTEN
    await new Promise((resolve) => setTimeout(resolve, 1000));
    pg = await startPostgres(`outbox-pgrestart-${process.pid}`);
    proxy.retarget(Number(new URL(pg.url).port));
    await eventually(
      async () => (await query<{ n: number }>(url, `SELECT count(*)::int AS n FROM "${schema}".outbox_messages WHERE status = 'delivered'`).catch(() => [{ n: 0 }]))[0].n === MESSAGES,
      'every message delivered after the restart', 120_000,
    );
    expect(new Set(receiver.received.map((r) => r.id)).size).toBe(MESSAGES);
    const last = new Map<string, number>();
    const backwards = receiver.received.filter((r) => {
      const before = last.get(r.key) ?? -1;
      last.set(r.key, r.n);
      return r.n < before;
    });
    expect(backwards).toEqual([]);
  });

  it('Redis restarted mid-relay to the bullmq target: deliveries fail and retry, then every message is delivered', async () => {
    redis = await startRedis(`outbox-redisrestart-${process.pid}`);
    const schema = uniqueSchema('obrd');
    const prefix = `{ob-${schema}}`;
    app = await boot(databaseUrl(), schema, {
      topics: { evt: { to: 'handler' }, bus: { to: 'bullmq', queue: 'events', prefix } }, relay: { pollInterval: 200, batchSize: 20 }, backoff: { delay: 50, maxDelay: 500 }, maxAttempts: 1000,
    }, { url: redis.url });
    await publishAll(app, 'bus');
    const delivered = async () => (await query<{ n: number }>(databaseUrl(), `SELECT count(*)::int AS n FROM "${schema}".outbox_messages WHERE status = 'delivered'`))[0].n;
    await eventually(async () => (await delivered()) >= 100, 'the relay mid-stream');
    const port = redis.port;
    await stopRedis(redis); // SIGKILL; this Redis keeps nothing on disk
    await new Promise((resolve) => setTimeout(resolve, 1000));
    redis = await startRedis(`outbox-redisrestart-${process.pid}`, port);
    const [{ at: restartedAt }] = await query<{ at: Date }>(databaseUrl(), 'SELECT now() AS at');
    await eventually(async () => (await delivered()) === MESSAGES, 'every message delivered after the restart', 120_000);
    // Jobs added before the kill died with that Redis; every message marked after the restart has its job, once.
    const after = await query<{ id: string }>(databaseUrl(), `SELECT id FROM "${schema}".outbox_messages WHERE delivered_at > '${restartedAt.toISOString()}'`);
    expect(after.length).toBeGreaterThan(0);
    const queue = new Queue('events', { connection: { url: redis.url }, prefix });
    try {
      const jobs = await queue.getJobs(['waiting'], 0, -1);
      const jobIds = new Set(jobs.map((j) => j.id));
      expect(jobIds.size).toBe(jobs.length);
      expect(after.filter((r) => !jobIds.has(r.id))).toEqual([]);
    } finally {
      await queue.close();
    }
  });
});
