// Method-guard benchmark: `npm run bench:guard` (scripts/run-bench.js provides DATABASE_URL and REDIS_URL).
// Two Nest application contexts in this process (one with Redis, one with `redis: false`, each on a fresh
// schema), driven with a fixed number of calls in flight for a fixed time; loopback only.
//
//   (a) the bare method (no decorator): the harness's own floor
//   (b) a bare Redis GET on the module's Redis client: the floor of one round trip
//   (c) @IdempotentMethod, first-time keys, with Redis
//   (d) @IdempotentMethod, duplicates with Redis (every call replays one completed key)
//   (e) @IdempotentMethod, first-time keys, redis: false (Postgres alone)
//   (f) @IdempotentMethod, duplicates, redis: false
//   (g) a bare prepared Postgres SELECT on the module's pool: the floor of one Postgres round trip
//
// Settings (environment): BENCH_CONCURRENCY calls in flight (50), BENCH_DURATION seconds (3), BENCH_WARMUP
// seconds (1), BENCH_CASES (all; e.g. "c,e"; (a) and (b) always run), BENCH_POOL_SIZE (unset: the module's
// default), BENCH_KEEP=1 keeps the schemas and Redis keys. To profile (node refuses --cpu-prof in NODE_OPTIONS),
// run it directly: `DATABASE_URL=… REDIS_URL=… node --cpu-prof -r ts-node/register/transpile-only bench/guard.bench.ts`.
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import Redis from 'ioredis';
import { Client } from 'pg';
import type { IdempotencyModuleOptions } from '../lib';
import { GuardBenchContext, GuardBenchResult, startGuardBenchContext } from './guard-bench.app';
import { connectBench, deleteRedisKeys, env, positiveInt, runBench, SHOWN_STATEMENTS, startWatchdog } from './bench-support';

const CONCURRENCY = positiveInt('BENCH_CONCURRENCY', 50);
const DURATION_S = positiveNumber('BENCH_DURATION', 3);
const WARMUP_S = positiveNumber('BENCH_WARMUP', 1);
const POOL_SIZE = process.env.BENCH_POOL_SIZE ? positiveInt('BENCH_POOL_SIZE', 10) : undefined;
const KEEP = process.env.BENCH_KEEP === '1';
const ONLY = (process.env.BENCH_CASES ?? '').split(',').map((s) => s.trim()).filter(Boolean);
/** Extra warm-up of the first case: the fresh process has not been through the JIT yet. */
const FIRST_WARMUP_EXTRA_S = 1;
/** Hard limit for the whole run; the benchmark itself takes about 45 s. */
const WATCHDOG_MS = 3 * 60_000;
const DRIFT_WARNING = 0.15;

const RUN = randomBytes(4).toString('hex');
const REDIS_PREFIX = `idem-guard-bench-${RUN}`;
const GET_KEY = `${REDIS_PREFIX}:bare-get`;
/** About the size of a cached record of the guarded method, so (b) moves a similar payload to (d). */
const GET_VALUE = JSON.stringify({ f: '', r: { ok: true, value: { arg: `dup-${RUN}`, run: 1 } }, e: Date.now() });

type CaseId = 'a' | 'b' | 'c' | 'd' | 'e' | 'f' | 'g';
type AppName = 'redis' | 'pg';
type Phase = 'w' | 'm';

interface Apps {
  redis: GuardBenchContext;
  pg: GuardBenchContext;
}

interface CaseSpec {
  id: CaseId;
  label: string;
  app: AppName;
  /** A call for one phase; `n` counts calls from 0. Returns a problem with the answer, if any (checked cheaply). */
  call(apps: Apps, phase: Phase): (n: number) => Promise<string | undefined>;
  prepare?(apps: Apps): Promise<string[]>;
}

interface Histogram {
  record(ms: number): void;
  percentile(p: number): number;
}

/** Log-bucketed latency histogram: 64 buckets per doubling (about 1 % resolution), no per-call allocation. */
function histogram(): Histogram {
  const PER_OCTAVE = 64;
  const counts = new Float64Array(40 * PER_OCTAVE); // up to 2^40 ns, far beyond any call here
  let total = 0;
  return {
    record(ms: number) {
      const ns = ms * 1e6;
      const i = ns <= 1 ? 0 : Math.min(counts.length - 1, Math.floor(Math.log2(ns) * PER_OCTAVE));
      counts[i]++;
      total++;
    },
    /** In milliseconds; the midpoint of the bucket holding the p-th percentile. */
    percentile(p: number) {
      if (total === 0) return NaN;
      const rank = Math.ceil((p / 100) * total);
      let seen = 0;
      for (let i = 0; i < counts.length; i++) {
        seen += counts[i];
        if (seen >= rank) return 2 ** ((i + 0.5) / PER_OCTAVE) / 1e6;
      }
      return NaN;
    },
  };
}

interface DriveResult {
  calls: number;
  errors: number;
  /** Answers the case's check found wrong (wrong value, or not a replay). */
  wrong: number;
  firstProblem?: string;
  elapsedMs: number;
  latency: Histogram;
  /** This process's CPU time (user + system), microseconds. */
  cpuUs: number;
}

/**
 * Keeps `CONCURRENCY` calls in flight until `durationMs` has passed; calls started before then are awaited
 * and counted, so the run is bounded by the duration plus one call.
 */
async function drive(call: (n: number) => Promise<string | undefined>, durationMs: number): Promise<DriveResult> {
  const latency = histogram();
  let next = 0;
  let calls = 0;
  let errors = 0;
  let wrong = 0;
  let firstProblem: string | undefined;
  const cpu = process.cpuUsage();
  const start = performance.now();
  const end = start + durationMs;
  const worker = async () => {
    for (let t0 = performance.now(); t0 < end; t0 = performance.now()) {
      try {
        const problem = await call(next++);
        if (problem !== undefined) {
          wrong++;
          firstProblem ??= problem;
        }
      } catch (err) {
        errors++;
        firstProblem ??= `threw ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}`;
      }
      latency.record(performance.now() - t0);
      calls++;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const elapsedMs = performance.now() - start;
  const used = process.cpuUsage(cpu);
  return { calls, errors, wrong, firstProblem, elapsedMs, latency, cpuUs: used.user + used.system };
}

function expectArg(result: GuardBenchResult, arg: string): string | undefined {
  return result.arg === arg ? undefined : `returned ${JSON.stringify(result)} for ${arg}`;
}

/** A duplicate must get the stored result of the one run: the same argument and run number. */
function expectReplay(result: GuardBenchResult, arg: string, run: number): string | undefined {
  return result.arg === arg && result.run === run ? undefined : `returned ${JSON.stringify(result)}, expected the stored {"arg":"${arg}","run":${run}}`;
}

const dupArg = (app: AppName) => `dup-${app}-${RUN}`;
/** The run number the duplicate key's one run returned, set by its preparation. */
const dupRun: Partial<Record<AppName, number>> = {};

async function prepareDuplicate(ctx: GuardBenchContext, app: AppName): Promise<string[]> {
  const arg = dupArg(app);
  const first = await ctx.service.guarded(arg);
  dupRun[app] = first.run;
  const runsBefore = ctx.service.guardedTotal.runs;
  const second = await ctx.service.guarded(arg);
  const problems: string[] = [];
  if (ctx.service.guardedTotal.runs !== runsBefore) problems.push(`preparing "${arg}": the second call ran the method again`);
  const wrong = expectReplay(second, arg, first.run);
  if (wrong) problems.push(`preparing "${arg}": the second call ${wrong}`);
  return problems;
}

function firstTimeCase(id: CaseId, label: string, app: AppName): CaseSpec {
  return {
    id, label, app,
    call: (apps, phase) => {
      const service = apps[app].service;
      const prefix = `new-${app}-${RUN}-${phase}-`;
      return async (n) => {
        const arg = prefix + n;
        return expectArg(await service.guarded(arg), arg);
      };
    },
  };
}

function duplicateCase(id: CaseId, label: string, app: AppName): CaseSpec {
  return {
    id, label, app,
    call: (apps) => {
      const service = apps[app].service;
      const arg = dupArg(app);
      const run = dupRun[app] ?? -1;
      return async () => expectReplay(await service.guarded(arg), arg, run);
    },
    prepare: (apps) => prepareDuplicate(apps[app], app),
  };
}

const CASES: CaseSpec[] = [
  {
    id: 'a', label: '(a) bare method, no decorator', app: 'redis',
    call: (apps) => {
      const service = apps.redis.service;
      const arg = `plain-${RUN}`;
      return async () => expectArg(await service.plain(arg), arg);
    },
  },
  {
    id: 'b', label: '(b) bare Redis GET', app: 'redis',
    call: (apps) => {
      const redis = apps.redis.redis!;
      return async () => ((await redis.get(GET_KEY)) === GET_VALUE ? undefined : 'GET answered another value');
    },
    prepare: async (apps) => {
      if (!apps.redis.redis) throw new Error("the module's Redis client could not be found; the benchmark needs it for (b)");
      await apps.redis.redis.set(GET_KEY, GET_VALUE);
      return [];
    },
  },
  firstTimeCase('c', '(c) first-time keys, Redis', 'redis'),
  duplicateCase('d', '(d) duplicates, Redis', 'redis'),
  firstTimeCase('e', '(e) first-time keys, redis: false', 'pg'),
  duplicateCase('f', '(f) duplicates, redis: false', 'pg'),
  {
    id: 'g', label: '(g) bare Postgres SELECT (prepared)', app: 'pg',
    call: (apps) => {
      const pool = apps.pg.pool!;
      const query = { name: 'guard_bench_select', text: 'SELECT $1::text AS v', values: [RUN] };
      return async () => {
        const { rows } = await pool.query<{ v: string }>(query);
        return rows[0]?.v === RUN ? undefined : 'SELECT answered another value';
      };
    },
    prepare: (apps) => {
      if (!apps.pg.pool) throw new Error("the module's Postgres pool could not be found; the benchmark needs it for (g)");
      return Promise.resolve([]);
    },
  },
];
/** Measured in this order: reads before writes, so Postgres background work after (c)/(e) does not disturb them. */
const RUN_ORDER = (['a', 'b', 'g', 'd', 'f', 'c', 'e'] as CaseId[]).filter((id) => id === 'a' || id === 'b' || ONLY.length === 0 || ONLY.includes(id));

interface CaseResult {
  spec: CaseSpec;
  run: DriveResult;
  cps: number;
  /** Method runs during the measured phase. */
  methodRuns: number;
  trips?: { queries: Record<string, number>; redis: Record<string, number> };
  /** Commands Redis processed during the measured phase (scripts' inner commands included). */
  redisServerCmds: number;
  /** CPU time Redis used during the measured phase, microseconds. */
  redisCpuUs: number;
  warnings: string[];
}

function positiveNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a number greater than 0, got "${raw}"`);
  return n;
}

/** Commands Redis has processed so far and its CPU seconds, leaving out the benchmark's own INFO calls. */
async function redisServerStats(redis: Redis): Promise<{ calls: number; cpuUs: number }> {
  // INFO without a section leaves commandstats out.
  const info = `${await redis.info('commandstats')}\n${await redis.info('cpu')}`;
  let calls = 0;
  for (const m of info.matchAll(/^cmdstat_(\w+(?:\|\w+)?):calls=(\d+)/gm)) {
    if (m[1] !== 'info') calls += Number(m[2]);
  }
  const cpu = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0);
  return { calls, cpuUs: (cpu('used_cpu_user') + cpu('used_cpu_sys')) * 1e6 };
}

interface RecordCounts {
  completed: number;
  other: number;
}

async function recordCounts(db: Client, schema: string): Promise<RecordCounts> {
  const { rows } = await db.query<{ completed: string; other: string }>(
    `SELECT count(*) FILTER (WHERE status = 'completed') AS completed, count(*) FILTER (WHERE status <> 'completed') AS other
       FROM "${schema}".idempotency_records WHERE scope = 'method:default'`,
  );
  return { completed: Number(rows[0].completed), other: Number(rows[0].other) };
}

async function countRedisKeys(redis: Redis, pattern: string): Promise<number> {
  let n = 0;
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    n += keys.length;
  } while (cursor !== '0');
  return n;
}

/** Cheap correctness checks after a case; problems are reported as warnings, never as failures. */
async function check(spec: CaseSpec, r: DriveResult, apps: Apps, db: Client, redis: Redis, schemas: Record<AppName, string>): Promise<string[]> {
  const w: string[] = [];
  if (r.calls === 0) w.push('no call completed');
  if (r.errors > 0) w.push(`${r.errors} calls threw (first: ${r.firstProblem})`);
  if (r.wrong > 0) w.push(`${r.wrong} wrong answers (first: ${r.firstProblem})`);
  const ctx = apps[spec.app];
  const phase = ctx.service.guardedPhase;
  switch (spec.id) {
    case 'a':
      if (ctx.service.plainRuns !== r.calls) w.push(`the method ran ${ctx.service.plainRuns} times for ${r.calls} calls`);
      break;
    case 'c':
    case 'e': {
      // Every call had a new argument: exactly one run per call, never twice for one argument.
      if (phase.runs !== r.calls - r.errors) w.push(`the method ran ${phase.runs} times for ${r.calls - r.errors} successful first-time calls`);
      if (phase.repeated > 0) w.push(`the method ran again for ${phase.repeated} arguments it had already run for`);
      const total = ctx.service.guardedTotal;
      const rows = await recordCounts(db, schemas[spec.app]);
      if (rows.completed !== total.runs - total.repeated || rows.other > 0) {
        w.push(`Postgres holds ${rows.completed} completed and ${rows.other} other records for ${total.runs - total.repeated} distinct keys run`);
      }
      if (spec.app === 'redis') {
        const markers = await countRedisKeys(redis, `${REDIS_PREFIX}:*:f`);
        if (markers > 0) w.push(`${markers} in-flight markers left in Redis after every call completed`);
      }
      break;
    }
    case 'd':
    case 'f':
      if (phase.runs > 0) w.push(`the method ran ${phase.runs} times; duplicates must replay without running it`);
      break;
  }
  return w;
}

const fmt = {
  int: (n: number) => Math.round(n).toLocaleString('en-US'),
  us: (ms: number) => {
    const us = ms * 1000;
    return us >= 100 ? us.toFixed(0) : us.toFixed(1);
  },
  ratio: (n: number) => (n >= 10 ? `${n.toFixed(0)}×` : n >= 0.1 ? `${n.toFixed(2)}×` : `${n.toFixed(3)}×`),
  pct: (n: number) => `${(n * 100).toFixed(0)}%`,
  per: (n: number, total: number) => (total > 0 ? (n / total).toFixed(2) : '-'),
};

/** A Markdown table with aligned columns; columns after the first are right-aligned. */
function markdownTable(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join(' | ')} |`;
  const rule = `|${widths.map((w, i) => (i === 0 ? `:${'-'.repeat(w + 1)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
  return [line(header), rule, ...rows.map(line)].join('\n');
}

async function runCase(spec: CaseSpec, apps: Apps, first: boolean, db: Client, redis: Redis, schemas: Record<AppName, string>): Promise<CaseResult> {
  const ctx = apps[spec.app];
  const warnings = spec.prepare ? await spec.prepare(apps) : [];
  await drive(spec.call(apps, 'w'), (WARMUP_S + (first ? FIRST_WARMUP_EXTRA_S : 0)) * 1000);
  ctx.service.resetPhase();
  ctx.trips.reset();
  const before = await redisServerStats(redis);
  const run = await drive(spec.call(apps, 'm'), DURATION_S * 1000);
  const after = await redisServerStats(redis);
  const methodRuns = spec.id === 'a' ? ctx.service.plainRuns : ctx.service.guardedPhase.runs;
  const trips = ctx.counting ? ctx.trips.snapshot() : undefined;
  warnings.push(...(await check(spec, run, apps, db, redis, schemas)));
  const cps = run.calls / (run.elapsedMs / 1000);
  process.stderr.write(`[bench] ${spec.label}: ${fmt.int(cps)} calls/s\n`);
  return { spec, run, cps, methodRuns, trips, redisServerCmds: after.calls - before.calls, redisCpuUs: after.cpuUs - before.cpuUs, warnings };
}

function report(results: CaseResult[], bAgain: CaseResult): void {
  const a = results.find((r) => r.spec.id === 'a')!;
  const b = results.find((r) => r.spec.id === 'b')!;
  const rows = results.map(({ spec, run, cps }) => [
    spec.label, fmt.int(cps), fmt.us(run.latency.percentile(50)), fmt.us(run.latency.percentile(99)),
    fmt.ratio(cps / b.cps),
    // Against (a) the per-call time matters more than the throughput: (a) is the harness's floor.
    spec.id === 'a' ? '-' : `${fmt.us(1000 / cps - 1000 / a.cps)}`,
    fmt.int(run.calls), fmt.int(run.errors + run.wrong),
  ]);
  process.stdout.write(`\n### @IdempotentMethod() throughput (${CONCURRENCY} calls in flight, ${DURATION_S} s per case)\n\n`);
  process.stdout.write(
    `${markdownTable(['Case', 'calls/s', 'p50 µs', 'p99 µs', 'vs (b) GET', 'µs/call over (a)', 'calls', 'errors'], rows)}\n`,
  );
  process.stdout.write(
    `\n"vs (b) GET": calls/s relative to one bare Redis round trip at the same concurrency. ` +
    `"µs/call over (a)": 1/throughput minus that of the bare method, i.e. the wall time each call adds when ${CONCURRENCY} run at once.\n`,
  );

  const trips = results.map((r) => {
    const total = r.run.calls;
    const q = r.trips?.queries ?? {};
    const other = Object.entries(q).filter(([k]) => !SHOWN_STATEMENTS.has(k)).reduce((sum, [, n]) => sum + n, 0);
    const pg = (n: number) => (r.trips ? fmt.per(n, total) : 'n/a');
    const redisTrips = r.trips ? Object.values(r.trips.redis).reduce((sum, n) => sum + n, 0) : 0;
    return [
      r.spec.label, fmt.per(r.methodRuns, total), pg((q.claim ?? 0) + (q.claimBatch ?? 0)), pg((q.complete ?? 0) + (q.completeBatch ?? 0)), pg(other),
      r.trips ? fmt.per(redisTrips, total) : 'n/a', fmt.per(r.redisServerCmds, total),
      total > 0 ? (r.run.cpuUs / total).toFixed(1) : '-', total > 0 ? (r.redisCpuUs / total).toFixed(1) : '-',
    ];
  });
  process.stdout.write(`\nPer call (round trips counted on the module's pool and Redis client, a statement shared by the claims or completions of one event-loop turn counting once; Redis-side commands include those run inside scripts; CPU from process.cpuUsage() and Redis INFO):\n\n`);
  process.stdout.write(
    `${markdownTable(['Case', 'method runs', 'pg claim', 'pg complete', 'pg other', 'Redis calls', 'Redis-side cmds', 'node CPU µs', 'Redis CPU µs'], trips)}\n`,
  );

  const drift = bAgain.cps / b.cps - 1;
  process.stdout.write(`\n(b) measured again after the others: ${fmt.int(bAgain.cps)} calls/s (${drift >= 0 ? '+' : ''}${fmt.pct(drift)}).\n`);
  if (Math.abs(drift) > DRIFT_WARNING) {
    process.stdout.write(`WARNING: (b) changed by ${fmt.pct(drift)} between its two runs; the machine's speed varied (other load?), so compare the ratios with care.\n`);
  }
  const warnings = [...results, bAgain].flatMap((r) => r.warnings.map((w) => `${r.spec.label}: ${w}`));
  for (const w of warnings) process.stdout.write(`WARNING ${w}\n`);
  if (warnings.length === 0) {
    process.stdout.write('Checks passed: no errors; duplicates never ran the method and got the stored result; first-time keys ran it once each, with one completed record each and no in-flight marker left.\n');
  }
}

async function cleanup(db: Client, redis: Redis, schemas: string[]): Promise<void> {
  for (const schema of schemas) await db.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await deleteRedisKeys(redis, `${REDIS_PREFIX}:*`);
}

async function main(): Promise<void> {
  startWatchdog(WATCHDOG_MS);
  const { db, redis } = await connectBench();
  const settings = await db.query<{ name: string; setting: string }>(
    `SELECT name, setting FROM pg_settings WHERE name IN ('server_version', 'fsync', 'synchronous_commit')`,
  );
  const pg = Object.fromEntries(settings.rows.map((r) => [r.name, r.setting]));
  const redisVersion = /^redis_version:(\S+)/m.exec(await redis.info('server'))?.[1] ?? '?';
  process.stdout.write(
    `Method-guard benchmark (run ${RUN}): node ${process.version}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), ` +
    `Postgres ${pg.server_version} (fsync=${pg.fsync}, synchronous_commit=${pg.synchronous_commit}), Redis ${redisVersion}, ` +
    `pool size ${POOL_SIZE ?? 'default (10)'}\n` +
    `load average at start: ${os.loadavg().map((n) => n.toFixed(2)).join(' ')}\n` +
    `${CONCURRENCY} calls in flight in one process, ${WARMUP_S} s warm-up + ${DURATION_S} s measured per case; ` +
    `Nest application contexts in this process, Postgres and Redis over loopback\n`,
  );

  const schemas: Record<AppName, string> = { redis: `bench_guard_${RUN}_r`, pg: `bench_guard_${RUN}_p` };
  const postgres = (schema: string) => ({ url: env('DATABASE_URL'), schema, ...(POOL_SIZE ? { poolSize: POOL_SIZE } : {}) });
  const options: Record<AppName, IdempotencyModuleOptions> = {
    redis: { postgres: postgres(schemas.redis), redis: { url: env('REDIS_URL'), keyPrefix: REDIS_PREFIX }, migrationsRun: true },
    pg: { postgres: postgres(schemas.pg), redis: false, migrationsRun: true },
  };
  const started: GuardBenchContext[] = [];
  try {
    process.stderr.write('[bench] starting the application contexts\n');
    const apps: Apps = {
      redis: await startGuardBenchContext(options.redis).then((c) => (started.push(c), c)),
      pg: await startGuardBenchContext(options.pg).then((c) => (started.push(c), c)),
    };
    const results: CaseResult[] = [];
    for (const id of RUN_ORDER) {
      results.push(await runCase(CASES.find((c) => c.id === id)!, apps, results.length === 0, db, redis, schemas));
    }
    // The reference once more, to show how much the machine drifted during the run.
    const bAgain = await runCase(CASES.find((c) => c.id === 'b')!, apps, false, db, redis, schemas);
    report(results.sort((x, y) => x.spec.id.localeCompare(y.spec.id)), bAgain);
  } finally {
    await Promise.allSettled(started.map((c) => c.app.close()));
    if (!KEEP) await cleanup(db, redis, Object.values(schemas)).catch((err: unknown) => process.stderr.write(`[bench] cleanup failed: ${String(err)}\n`));
    await db.end();
    redis.disconnect();
  }
}

runBench(main);
