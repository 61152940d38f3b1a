// Outbox benchmark: `npm run bench:outbox` (scripts/run-bench.js provides DATABASE_URL and REDIS_URL).
// One process, one run, to the bullmq target:
//   throughput: MESSAGES messages over KEYS keys are committed first, then 1 and then 3 relay instances (Nest app
//     contexts with their own pools) deliver them; messages/s from relay start to the last one marked delivered;
//   latency: single messages committed one at a time; commit → job added (BullMQ "added" event), p50/p99;
//   baseline: the same number of jobs added to BullMQ directly (addBulk of 100), jobs/s, and the ratio.
// Settings (environment): BENCH_SCALE (1; multiplies the amounts of work), BENCH_KEEP=1 keeps the schema.
import 'reflect-metadata';
import { INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Queue, QueueEvents } from 'bullmq';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { Pool } from 'pg';
import { IdempotencyModule, OutboxService } from '../lib';
import { IdempotencyConnections } from '../lib/storage/idempotency-connections';
import { env, runBench, startWatchdog } from './bench-support';

const DATABASE_URL = env('DATABASE_URL');
const REDIS_URL = env('REDIS_URL');
const SCALE = Number(process.env.BENCH_SCALE ?? 1);
const KEEP = process.env.BENCH_KEEP === '1';
const MESSAGES = Math.round(20_000 * SCALE);
const KEYS = 500;
const LATENCY_SAMPLES = Math.round(300 * SCALE);
const RUN_ID = randomBytes(4).toString('hex');
const SCHEMA = `bench_ob_${RUN_ID}`;
const PREFIX = `{bench-ob-${RUN_ID}}`;

async function boot(relay: boolean, queue: string): Promise<INestApplicationContext> {
  @Module({
    imports: [IdempotencyModule.forRoot({
      postgres: { url: DATABASE_URL, schema: SCHEMA, poolSize: 10 },
      redis: { url: REDIS_URL },
      migrationsRun: true,
      outbox: { topics: { 'bench.event': { to: 'bullmq', queue, prefix: PREFIX } }, relay: { enabled: relay, batchSize: 200, concurrency: 4 } },
      retention: { cleanupInterval: false },
    })],
  })
  class BenchModule {}
  return NestFactory.createApplicationContext(BenchModule, { logger: ['error'] });
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

async function delivered(db: Pool): Promise<number> {
  const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${SCHEMA}".outbox_messages WHERE status = 'delivered'`);
  return rows[0].n;
}

async function throughput(db: Pool, instances: number): Promise<number> {
  const queue = `tp-${instances}`;
  const publisher = await boot(false, queue);
  const outbox = publisher.get(OutboxService);
  const dataSource = publisher.get(IdempotencyConnections).dataSource;
  await db.query(`TRUNCATE "${SCHEMA}".outbox_messages`);
  for (let i = 0; i < MESSAGES; i += 500) {
    const chunk = Array.from({ length: Math.min(500, MESSAGES - i) }, (_, j) => ({ topic: 'bench.event', key: `k${(i + j) % KEYS}`, payload: { n: i + j } }));
    await dataSource.transaction((m) => outbox.publish(m, chunk));
  }
  const t0 = performance.now();
  const relays = await Promise.all(Array.from({ length: instances }, () => boot(true, queue)));
  while ((await delivered(db)) < MESSAGES) await new Promise((resolve) => setTimeout(resolve, 20));
  const seconds = (performance.now() - t0) / 1000;
  await Promise.all([...relays, publisher].map((a) => a.close()));
  const q = new Queue(queue, { connection: { url: REDIS_URL }, prefix: PREFIX });
  const jobs = await q.count();
  await q.obliterate({ force: true });
  await q.close();
  if (jobs !== MESSAGES) throw new Error(`expected ${MESSAGES} jobs, found ${jobs}`);
  return MESSAGES / seconds;
}

async function latency(): Promise<number[]> {
  const queue = 'latency';
  const app = await boot(true, queue);
  const outbox = app.get(OutboxService);
  const dataSource = app.get(IdempotencyConnections).dataSource;
  const events = new QueueEvents(queue, { connection: { url: REDIS_URL }, prefix: PREFIX });
  await events.waitUntilReady();
  const added = new Map<string, () => void>();
  events.on('added', ({ jobId }) => added.get(jobId)?.());
  const samples: number[] = [];
  for (let i = 0; i < LATENCY_SAMPLES; i++) {
    const id = `lat-${RUN_ID}-${i}`;
    const seen = new Promise<void>((resolve) => added.set(id, resolve));
    await dataSource.transaction((m) => outbox.publish(m, { id, topic: 'bench.event', payload: { i } }));
    const t0 = performance.now();
    await seen;
    samples.push(performance.now() - t0);
  }
  await events.close();
  await app.close();
  const q = new Queue(queue, { connection: { url: REDIS_URL }, prefix: PREFIX });
  await q.obliterate({ force: true });
  await q.close();
  return samples.sort((a, b) => a - b);
}

async function baseline(): Promise<number> {
  const q = new Queue('baseline', { connection: { url: REDIS_URL }, prefix: PREFIX });
  await q.waitUntilReady();
  const t0 = performance.now();
  for (let i = 0; i < MESSAGES; i += 100) {
    await q.addBulk(Array.from({ length: Math.min(100, MESSAGES - i) }, (_, j) => ({ name: 'bench.event', data: { n: i + j }, opts: { jobId: `b-${i + j}` } })));
  }
  const rate = MESSAGES / ((performance.now() - t0) / 1000);
  await q.obliterate({ force: true });
  await q.close();
  return rate;
}

async function main(): Promise<void> {
  startWatchdog(15 * 60_000);
  const db = new Pool({ connectionString: DATABASE_URL, max: 2 });
  process.stdout.write(`outbox bench: ${MESSAGES} messages over ${KEYS} keys, ${os.cpus().length} cores, schema ${SCHEMA}\n`);
  try {
    const direct = await baseline();
    process.stdout.write(`BullMQ addBulk directly:   ${direct.toFixed(0)} jobs/s\n`);
    for (const instances of [1, 3]) {
      const rate = await throughput(db, instances);
      process.stdout.write(`relayed, ${instances} instance${instances > 1 ? 's' : ' '}:    ${rate.toFixed(0)} messages/s (${(rate / direct).toFixed(2)}× direct)\n`);
    }
    const samples = await latency();
    process.stdout.write(`commit → job added:        p50 ${pct(samples, 50).toFixed(1)} ms, p99 ${pct(samples, 99).toFixed(1)} ms (${samples.length} samples, one at a time)\n`);
  } finally {
    if (!KEEP) await db.query(`DROP SCHEMA IF EXISTS "${SCHEMA}" CASCADE`).catch(() => undefined);
    await db.end();
  }
}

runBench(main);
