// Small pieces every benchmark script shares: settings from the environment, cleanup, and the exit protocol.
import Redis from 'ioredis';
import { Client } from 'pg';

/** A whole-number setting of at least 1 from the environment, or `fallback`. */
export function positiveInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a whole number of at least 1, got "${raw}"`);
  return n;
}

/** A required variable; the benchmarks get DATABASE_URL and REDIS_URL from `npm run bench:<name>`. */
export function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the benchmark with \`npm run bench:<name>\`, which provides it`);
  return value;
}

/** Removes every Redis key matching `pattern` (SCAN + UNLINK, so a large keyspace is never blocked). */
export async function deleteRedisKeys(redis: Redis, pattern: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.unlink(...keys);
  } while (cursor !== '0');
}

/** Runs a benchmark's main function and exits with 0, or prints the error and exits with 1. */
export function runBench(main: () => Promise<void>): void {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
      process.exit(1);
    },
  );
}

/** Ends the process if the benchmark has not finished within `ms` (a stuck run must not hold the machine). */
export function startWatchdog(ms: number): void {
  const watchdog = setTimeout(() => {
    process.stderr.write(`[bench] gave up after ${ms / 1000} s\n`);
    process.exit(1);
  }, ms);
  watchdog.unref();
}

/** The benchmark's own Postgres and Redis connections (for settings, checks and cleanup), outside the measured app. */
export async function connectBench(): Promise<{ db: Client; redis: Redis }> {
  const db = new Client({ connectionString: env('DATABASE_URL') });
  await db.connect();
  const redis = new Redis(env('REDIS_URL'), { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  return { db, redis };
}

/**
 * The store's statements the round-trip tables show in columns of their own: a claim (or completion) statement,
 * alone or shared by the claims (completions) of one turn of the event loop, which counts once for all of them.
 */
export const SHOWN_STATEMENTS = new Set(['claim', 'claimBatch', 'complete', 'completeBatch']);
