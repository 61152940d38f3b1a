// Postgres and Redis of the chaos run: started under .data/chaos-<pid>/, restarted at the same address, stopped by
// PID (never by name). Built on scripts/services.js, as the tests and benchmarks are.
import type { ChildProcess } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import Redis from 'ioredis';
import { Client } from 'pg';

interface ServicesModule {
  startRedis(name: string, fixedPort?: number): Promise<{ url: string; port: number; proc: ChildProcess }>;
  startPostgres(name: string, fixedPort?: number): Promise<{ url: string; proc: ChildProcess }>;
  stop(proc: ChildProcess | undefined, signal?: NodeJS.Signals): Promise<void>;
  freePort(): Promise<number>;
  ROOT: string;
}

// eslint-disable-next-line @typescript-eslint/no-require-imports
export const services = require('../scripts/services') as ServicesModule;

/** One query on a fresh connection, so the orchestrator itself rides out the Postgres restart. */
export async function sql<T>(url: string, text: string, params: unknown[] = []): Promise<T[]> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text, params)).rows as T[];
  } finally {
    await client.end();
  }
}

/** The Postgres and Redis one chaos run owns. */
export class ChaosServices {
  private pg?: ChildProcess;
  private redis?: ChildProcess;
  private pgPort = 0;
  private redisPort = 0;
  databaseUrl = '';
  redisUrl = '';

  constructor(readonly name: string) {}

  async start(): Promise<void> {
    const pg = await services.startPostgres(this.name);
    this.pg = pg.proc;
    this.databaseUrl = pg.url;
    this.pgPort = Number(new URL(pg.url).port);
    await this.trackCommitTimestamps();
    const redis = await services.startRedis(this.name);
    this.redis = redis.proc;
    this.redisUrl = redis.url;
    this.redisPort = redis.port;
  }

  /**
   * Postgres records when each transaction committed, so a step run can be compared with its checkpoint's commit:
   * `completed_at` is `now()`, the start of the checkpoint's transaction, which a lock wait can put well before the
   * commit (the commit timestamp is taken just before the transaction becomes visible: a bound microseconds early).
   * The setting takes effect when the server starts, hence the restart (ALTER SYSTEM keeps it for the later ones).
   */
  private async trackCommitTimestamps(): Promise<void> {
    await sql(this.databaseUrl, 'ALTER SYSTEM SET track_commit_timestamp = on');
    await this.restartPostgres(0);
    const [{ track_commit_timestamp: on }] = await sql<{ track_commit_timestamp: string }>(this.databaseUrl, 'SHOW track_commit_timestamp');
    if (on !== 'on') throw new Error(`chaos: track_commit_timestamp is "${on}" after the restart; the rerun check needs it on`);
  }

  /** Fast shutdown of Postgres (every session cut, transactions in flight rolled back), then the same port again. */
  async restartPostgres(downMs: number): Promise<void> {
    await this.stopPostgres();
    await new Promise((resolve) => setTimeout(resolve, downMs));
    this.pg = (await services.startPostgres(this.name, this.pgPort)).proc;
  }

  /** SIGKILLs Redis and starts an empty one (no persistence) on the same port. */
  async restartRedisEmpty(downMs: number): Promise<void> {
    await services.stop(this.redis, 'SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, downMs));
    this.redis = (await services.startRedis(this.name, this.redisPort)).proc;
  }

  /** FLUSHALL: every queue, job and cached record gone while Redis stays up. */
  async flushRedis(): Promise<void> {
    const client = new Redis(this.redisUrl, { maxRetriesPerRequest: 2, lazyConnect: true });
    try {
      await client.connect();
      await client.flushall();
    } finally {
      client.disconnect();
    }
  }

  async stop({ removeData }: { removeData: boolean }): Promise<void> {
    await services.stop(this.redis, 'SIGKILL');
    await this.stopPostgres();
    if (removeData) rmSync(join(services.ROOT, '.data', this.name), { recursive: true, force: true });
  }

  /** As root the server runs under runuser, which does not forward signals: signal the postmaster by its pid file. */
  private async stopPostgres(): Promise<void> {
    try {
      const pid = Number(readFileSync(join(services.ROOT, '.data', this.name, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
      if (Number.isInteger(pid) && pid > 0) process.kill(pid, 'SIGINT');
    } catch {
      // not running
    }
    await services.stop(this.pg, 'SIGINT');
  }
}
