// The task cases of `npm run bench:workflows` (issue 12), in an app of their own (own schema, own queue prefix):
// enqueue→completed throughput of @Task() jobs with a task id and without one (identity always_unique), 100 enqueues
// in flight and a worker concurrency of 50, against raw BullMQ add→completed in the same run and the same shape.
// BENCH_TASKS=0 skips them; BENCH_BASE=<checkout> measures that checkout's library too (before/after in one run).
// `node scripts/run-bench.js workflows-tasks` runs only these cases.
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Queue, Worker } from 'bullmq';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import Redis from 'ioredis';
import { Pool } from 'pg';
import * as thisLib from '../lib';
import { deleteRedisKeys } from './bench-support';
import { keepInFlight, waitFor } from './workflow-bench-support';
import { installRoundTripCounter, perUnit, readCounts } from './round-trip-counter';

/** What the task cases take from a library: this checkout's, or BENCH_BASE's. */
type TaskLib = Pick<typeof thisLib, 'IdempotencyModule' | 'Task' | 'TaskClient'>;

/** The bench's tasks, decorated by `lib`'s `@Task()`. */
function benchTasks(lib: TaskLib) {
  @Injectable()
  class BenchTasks {
    @lib.Task({ name: 'bench-task-keyed', queue: 'bench-tasks' })
    keyed(n: number): Promise<number> {
      return Promise.resolve(n);
    }

    @lib.Task({ name: 'bench-task-unkeyed', queue: 'bench-tasks', identity: 'always_unique' })
    unkeyed(n: number): Promise<number> {
      return Promise.resolve(n);
    }
  }
  return BenchTasks;
}
type BenchTasks = InstanceType<ReturnType<typeof benchTasks>>;

const IN_FLIGHT = 100;
const CONCURRENCY = 50;

/** Raw BullMQ: `jobs` adds (100 in flight) to a worker of concurrency 50; jobs/s from the first add to the last completion. */
async function rawBullmq(redisUrl: string, prefix: string, jobs: number): Promise<TaskRun> {
  const connection = { url: redisUrl, maxRetriesPerRequest: null };
  const queue = new Queue('raw-tasks', { connection, prefix });
  let done = 0;
  const worker = new Worker('raw-tasks', (job) => Promise.resolve(job.data as unknown), { connection, prefix, concurrency: CONCURRENCY });
  worker.on('completed', () => done++);
  await worker.waitUntilReady();
  const counts = readCounts();
  const t0 = performance.now();
  await keepInFlight(jobs, IN_FLIGHT, (i) => queue.add('t', { i }, { jobId: `raw-${i}`, removeOnComplete: true, removeOnFail: true }));
  await waitFor('raw BullMQ jobs to complete', () => Promise.resolve(done >= jobs), 120_000);
  const ms = performance.now() - t0;
  const cost = perUnit(counts, jobs);
  await worker.close();
  await queue.obliterate({ force: true }).catch(() => undefined);
  await queue.close();
  return { perSec: jobs / (ms / 1000), cost };
}

/** What one case measured: tasks/s, and per task this process's Postgres statements, Redis commands and CPU. */
interface TaskRun {
  perSec: number;
  cost: ReturnType<typeof perUnit>;
}

/**
 * Task enqueues (100 in flight); tasks/s from the first enqueue until Postgres shows every one completed. The counts
 * include the bench's own completion polls (one query per 10 ms).
 */
async function ours(app: TaskApp, pool: Pool, method: 'keyed' | 'unkeyed', tasksCount: number, offset: number): Promise<TaskRun> {
  const { tasks, provider, schema } = app;
  const name = method === 'keyed' ? 'bench-task-keyed' : 'bench-task-unkeyed';
  const completed = async () =>
    (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${schema}".workflow_executions WHERE workflow_name = $1 AND status = 'completed'`, [name])).rows[0].n;
  const before = await completed();
  const counts = readCounts();
  const t0 = performance.now();
  await keepInFlight(tasksCount, IN_FLIGHT, (i) =>
    method === 'keyed' ? tasks.enqueue(provider, 'keyed', [offset + i], { taskId: `bench-${offset + i}` }) : tasks.enqueue(provider, 'unkeyed', [offset + i]));
  await waitFor(`${name} tasks to complete`, async () => (await completed()) - before >= tasksCount, 300_000);
  return { perSec: tasksCount / ((performance.now() - t0) / 1000), cost: perUnit(counts, tasksCount) };
}

/** A running app of one library's task cases. */
interface TaskApp {
  tasks: thisLib.TaskClient;
  provider: abstract new () => BenchTasks;
  schema: string;
  prefix: string;
  close(): Promise<void>;
}

async function taskApp(lib: TaskLib, databaseUrl: string, redisUrl: string): Promise<TaskApp> {
  const runId = randomBytes(4).toString('hex');
  const schema = `bench_task_${runId}`;
  const prefix = `{bench-task-${runId}}`;
  const provider = benchTasks(lib);
  @Module({
    imports: [
      lib.IdempotencyModule.forRoot({
        postgres: { url: databaseUrl, schema, poolSize: 20 },
        redis: { url: redisUrl, keyPrefix: `idem-${schema}` },
        migrationsRun: true,
        workflows: { queuePrefix: prefix, concurrency: CONCURRENCY },
      }),
    ],
    providers: [provider],
  })
  class TaskBenchModule {}
  const app = await NestFactory.createApplicationContext(TaskBenchModule, { logger: ['warn', 'error'] });
  return { tasks: app.get(lib.TaskClient), provider, schema, prefix, close: () => app.close() };
}

/** Runs the task cases; returns the lines to print (a table and the goal). */
export async function taskCases(databaseUrl: string, redisUrl: string, count: number): Promise<string[]> {
  const baseDir = process.env.BENCH_BASE ? path.resolve(process.env.BENCH_BASE) : undefined;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const baseLib = baseDir ? (require(path.join(baseDir, 'lib')) as TaskLib) : undefined;
  const apps = [await taskApp(thisLib, databaseUrl, redisUrl), ...(baseLib ? [await taskApp(baseLib, databaseUrl, redisUrl)] : [])];
  const pool = new Pool({ connectionString: databaseUrl, max: 4 });
  const redis = new Redis(redisUrl);
  installRoundTripCounter();
  try {
    for (const app of apps) await ours(app, pool, 'keyed', Math.min(500, count), 10_000_000); // warm-up
    const raw = await rawBullmq(redisUrl, apps[0].prefix, count);
    const keyed = await ours(apps[0], pool, 'keyed', count, 0);
    const unkeyed = await ours(apps[0], pool, 'unkeyed', count, 0);
    const base = apps[1] ? { keyed: await ours(apps[1], pool, 'keyed', count, 0), unkeyed: await ours(apps[1], pool, 'unkeyed', count, 0) } : undefined;
    const f = (n: number) => n.toFixed(0);
    const row = (label: string, r: TaskRun) =>
      `| ${label} | ${f(r.perSec)} | ${((100 * r.perSec) / raw.perSec).toFixed(1)}% | ${r.cost.postgres.toFixed(2)} | ${r.cost.redis.toFixed(2)} | ${f(r.cost.cpuMicros)} |`;
    return [
      '',
      `| tasks (issue 12): enqueue→completed, ${IN_FLIGHT} enqueues in flight, worker concurrency ${CONCURRENCY}, ${count} each | per s | vs raw BullMQ | PG statements per task | Redis commands per task | CPU µs per task (this process) |`,
      '|---|---:|---:|---:|---:|---:|',
      row('raw BullMQ add→completed (custom job id, removeOnComplete)', raw),
      row('@Task() with a task id', keyed),
      row('@Task() without a task id (identity always_unique)', unkeyed),
      ...(base ? [row("@Task() with a task id, BENCH_BASE's library", base.keyed), row("@Task() without a task id, BENCH_BASE's library", base.unkeyed)] : []),
      `goal (issue 12): tasks with ids ≥ 2,000/s → ${f(keyed.perSec)}/s (${keyed.perSec >= 2000 ? 'met' : 'NOT met'})`,
    ];
  } finally {
    for (const app of apps) {
      await app.close();
      await pool.query(`DROP SCHEMA IF EXISTS "${app.schema}" CASCADE`).catch(() => undefined);
      await deleteRedisKeys(redis, `${app.prefix}:*`);
    }
    await pool.end();
    redis.disconnect();
  }
}
