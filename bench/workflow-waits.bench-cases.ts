// The waiting cases of `npm run bench:workflows` (issue 11), in an app of their own (own schema, own queue prefix):
//   sleep wake-up lateness: N workflows asleep at once (default 1,000), wake-up times spread over ten seconds;
//         lateness = when the code after `sleep()` ran − the wake-up time stored in Postgres (p50/p99);
//   send→recv latency: workflows suspended in `recv()`, one message sent at a time; latency = from before `send()`
//         to when the workflow code received the message (p50/p99). Both paths cross BullMQ (a delayed job that
//         fires, a delayed job promoted by `send`) and replay the run from Postgres.
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { randomBytes } from 'node:crypto';
import Redis from 'ioredis';
import { Pool } from 'pg';
import { IdempotencyModule, recv, sleep, Workflow, WorkflowClient } from '../lib';
import { deleteRedisKeys } from './bench-support';
import { keepInFlight, percentile } from './workflow-bench-support';

/** When the code after each sleep ran, by workflow id (the first time only: later replays return at once too). */
const woke = new Map<string, number>();
/** When each message reached the workflow code, by message id. */
const received = new Map<string, number>();

@Workflow({ name: 'bench-sleeper', identity: 'caller_provided' })
class Sleeper {
  async run(input: { id: string; wakeAt: number }): Promise<void> {
    await sleep(Math.max(0, input.wakeAt - Date.now()));
    if (!woke.has(input.id)) woke.set(input.id, Date.now());
  }
}

@Workflow({ name: 'bench-receiver', identity: 'caller_provided' })
class Receiver {
  async run(_input: { n: number }): Promise<void> {
    const message = await recv<{ id: string }>();
    if (message && !received.has(message.id)) received.set(message.id, Date.now());
  }
}

/** One waiting case's figures (ms). */
export interface WaitFigures {
  label: string;
  p50: number;
  p99: number;
}

async function waitFor(what: string, check: () => Promise<boolean> | boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`bench: ${what} did not happen within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Runs both waiting cases; `sleepers` workflows asleep at once, `messages` sends one at a time. */
export async function waitCases(databaseUrl: string, redisUrl: string, sleepers: number, messages: number): Promise<WaitFigures[]> {
  const runId = randomBytes(4).toString('hex');
  const schema = `bench_wait_${runId}`;
  const prefix = `{bench-wait-${runId}}`;
  @Module({
    imports: [
      IdempotencyModule.forRoot({
        postgres: { url: databaseUrl, schema, poolSize: 20 },
        redis: { url: redisUrl, keyPrefix: `idem-${schema}` },
        migrationsRun: true,
        workflows: { queuePrefix: prefix, concurrency: 100, workflowConcurrency: 200 },
      }),
    ],
    providers: [Sleeper, Receiver],
  })
  class WaitBenchModule {}

  const app = await NestFactory.createApplicationContext(WaitBenchModule, { logger: ['warn', 'error'] });
  const client = app.get(WorkflowClient);
  const pool = new Pool({ connectionString: databaseUrl, max: 4 });
  const redis = new Redis(redisUrl);
  try {
    // Sleep: all asleep before the first wakes (starts take a few seconds on a loaded machine).
    const startBy = Date.now() + Math.max(5000, sleepers * 8);
    const spreadMs = 10_000;
    await keepInFlight(sleepers, 50, (i) => client.start(Sleeper, { id: `s${i}`, wakeAt: startBy + Math.floor((spreadMs * i) / sleepers) }, { workflowId: `s${i}` }));
    await waitFor('every sleeper finished', async () => {
      const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${schema}".workflow_executions WHERE workflow_name = 'bench-sleeper' AND status = 'completed'`);
      return rows[0].n === sleepers;
    }, 120_000);
    const { rows: waits } = await pool.query<{ workflow_id: string; wake_ms: number }>(
      `SELECT x.workflow_id, (extract(epoch FROM w.wake_at) * 1000)::float8 AS wake_ms
         FROM "${schema}".workflow_waits w JOIN "${schema}".workflow_executions x ON x.id = w.execution_id WHERE x.workflow_name = 'bench-sleeper'`,
    );
    const lateness = waits.map((w) => (woke.get(w.workflow_id) ?? NaN) - w.wake_ms).filter((n) => !Number.isNaN(n));

    // send→recv: every receiver suspended in recv() first, then one message at a time.
    for (let i = 0; i < messages; i++) await client.start(Receiver, { n: i }, { workflowId: `r${i}` });
    await waitFor('every receiver waits', async () => {
      const { rows } = await pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${schema}".workflow_executions WHERE workflow_name = 'bench-receiver' AND status = 'pending' AND suspended_until IS NOT NULL`);
      return rows[0].n === messages;
    }, 120_000);
    const latencies: number[] = [];
    for (let i = 0; i < messages; i++) {
      const id = `m${i}`;
      const t0 = Date.now();
      await client.send(`r${i}`, { id });
      await waitFor(`message ${id} received`, () => received.has(id), 30_000);
      latencies.push((received.get(id) as number) - t0);
    }
    return [
      { label: `sleep wake-up lateness, ${sleepers} workflows asleep at once, waking over 10 s (actual − stored wake-up time)`, p50: percentile(lateness, 50), p99: percentile(lateness, 99) },
      { label: `send→recv latency, workflow suspended in recv(), ${messages} messages one at a time`, p50: percentile(latencies, 50), p99: percentile(latencies, 99) },
    ];
  } finally {
    await app.close();
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await pool.end();
    await deleteRedisKeys(redis, `${prefix}:*`);
    redis.disconnect();
  }
}
