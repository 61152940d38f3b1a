// HTTP benchmark: `npm run bench:http` (scripts/run-bench.js provides DATABASE_URL and REDIS_URL).
// For Express, then Fastify: real Nest apps, each in a child process of its own (bench/http-bench.server.ts),
// loaded by autocannon from this process over loopback with a fixed number of connections for a fixed time.
// Ratios are to (0), measured in the same run.
//
//   (0) baseline: the same route in an app without any idempotency module
//   (a) the same handler on a @SkipIdempotency() route of this library's app
//   (b) first-time keys: a new Idempotency-Key on every request
//   (c) replays from Redis: one completed key, every request replays it
//   (d) replays with redis: false (Postgres alone)
//   (e) 20-way concurrent duplicates: keys reused in groups of 20 (the first runs, the rest replay or get 409)
//   (f) peer: @node-idempotency/nestjs 1.x with its Redis adapter (no durable record), first-time keys
//   (g) peer: the same, replays
//   (h) floor of (d): the route runs one prepared indexed SELECT of the record (pg pool of the module's size)
//   (i) a route without the interceptor whose handler inserts one row; (j) first-time keys on the same insert;
//   (k) first-time keys on the same insert with transaction: true (the row commits with the stored response)
//   (o) first-time keys with transaction: true on (b)'s trivial handler: the one-commit path (claim and completion
//       in one transaction), as a ratio to (0) like (b)
//   (p) floor of (o): a route without the library running (o)'s two round trips on one pooled connection: START
//       TRANSACTION + a claim row, then the claim row's update + COMMIT
//   (n) floor of (k): a route without the library running (k)'s statements on one pooled connection: START TRANSACTION
//       + a claim row, the same insert, the claim row's update + COMMIT (three round trips, one commit)
//   (l) the bare app's route behind a no-op interceptor: what Nest charges for any interceptor (the floor of (a), (m))
//   (m) pass-through: requests without an Idempotency-Key on the guarded route of this library's app
//   (B), (C), (D), (M), (J), (K): (b), (c), (d), (m), (j), (k) with another checkout's library (BENCH_BASE=<its root>,
//   e.g. main's): before/after in one run
//
// Settings (environment): BENCH_CONNECTIONS (50), BENCH_DURATION seconds (5), BENCH_WARMUP seconds (1),
// BENCH_ADAPTERS ("express,fastify"), BENCH_CASES (all; e.g. "b,e"), BENCH_POOL_SIZE (unset: the module's default),
// BENCH_ROUNDS (1) repeats the read-only cases and reports medians, BENCH_KEEP=1 keeps the schemas and Redis keys,
// BENCH_CPU_PROF=<dir> profiles each measured run (<dir>/<adapter>-<case>.cpuprofile, without start-up and
// warm-up; open it in Chrome DevTools), sampled every BENCH_CPU_PROF_INTERVAL_US µs (200); with BENCH_HEAP_PROF=1
// also <dir>/<adapter>-<case>.heapprofile, a sampling profile of what the run allocated (garbage included).
import autocannon from 'autocannon';
import { fork, ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Redis from 'ioredis';
import { Client } from 'pg';
import type { IdempotencyModuleOptions } from '../lib';
import type { AdapterName, BenchAppSpec, HandlerStatsSnapshot } from './http-bench.app';
import type { BenchServerCommand, BenchServerConfig, BenchServerMessage } from './http-bench.server';
import { serverCpu } from './round-trip-counter';
import { connectBench, deleteRedisKeys, env, positiveInt, runBench, SHOWN_STATEMENTS, startWatchdog } from './bench-support';

const CONNECTIONS = positiveInt('BENCH_CONNECTIONS', 50);
const DURATION_S = positiveInt('BENCH_DURATION', 5);
const WARMUP_S = positiveInt('BENCH_WARMUP', 1);
const POOL_SIZE = process.env.BENCH_POOL_SIZE ? positiveInt('BENCH_POOL_SIZE', 10) : undefined;
const ADAPTERS = (process.env.BENCH_ADAPTERS ?? 'express,fastify').split(',').map((s) => s.trim()) as AdapterName[];
const KEEP = process.env.BENCH_KEEP === '1';
/** BENCH_ROUNDS=3 measures the read-only cases three times, interleaved, and reports each one's median (steadier on a loaded machine). */
const ROUNDS = positiveInt('BENCH_ROUNDS', 1);
/** BENCH_BASE=<dir>: a checkout of this repository (its `lib` is loaded) measured as (C), (D), (M) beside (c), (d), (m). */
const BASE_DIR = process.env.BENCH_BASE ? path.resolve(process.env.BENCH_BASE) : undefined;
/** BENCH_CASES=b,e runs only those (and the baseline (a)), e.g. while profiling. */
/** BENCH_CPU_PROF=<dir> writes a V8 CPU profile of each measured run there. */
const CPU_PROF_DIR = process.env.BENCH_CPU_PROF ? path.resolve(process.env.BENCH_CPU_PROF) : undefined;
const ONLY = (process.env.BENCH_CASES ?? '').split(',').map((s) => s.trim()).filter(Boolean);
const DUP_GROUP = 20;
const REQUEST_TIMEOUT_S = 5;
/** Hard limit for the whole run (a round of every case takes about a minute and a half per adapter on a quiet machine, far more under load). */
const WATCHDOG_MS = (5 + 5 * ROUNDS) * 60_000;
const SERVER_START_TIMEOUT_MS = 60_000;
const SETTLE_MS = 500;

/** The module's default pool size (lib/utils/validate-options.ts), for the floor's own pool. */
const DEFAULT_POOL_SIZE = 20;

const BODY = JSON.stringify({ amount: 42, currency: 'EUR' });
const RUN = randomBytes(4).toString('hex');

type CaseId = '0' | 'a' | 'b' | 'c' | 'd' | 'e' | 'f' | 'g' | 'h' | 'i' | 'j' | 'k' | 'l' | 'm' | 'n' | 'o' | 'p' | 'B' | 'C' | 'D' | 'M' | 'J' | 'K';
/** One process each: this library with Redis, with `redis: false`, the bare app, the peer, the floor, and BENCH_BASE's library with and without Redis. */
type AppName = 'redis' | 'pg' | 'bare' | 'peer' | 'floor' | 'base' | 'basepg';
type Phase = 'w' | 'm';

interface CaseSpec {
  id: CaseId;
  label: string;
  app: AppName;
  path: string;
  /** A key generator for one phase (warm-up or measured run); undefined: requests without a key. */
  keys(phase: Phase): () => string | undefined;
  /** Key prefix of the measured run, for the checks against Postgres. */
  measuredPrefix: string;
  prepare?(port: number): Promise<string[]>;
}

interface AdapterRun {
  results: CaseResult[];
  /** (0) measured again after the other cases, to show drift. */
  baselineAgain: autocannon.Result;
}

interface CaseResult {
  spec: CaseSpec;
  result: autocannon.Result;
  rps: number;
  handler: HandlerStatsSnapshot;
  /** Commands Redis processed during the measured run. */
  redisCalls: number;
  /** CPU µs the Postgres and Redis servers of this machine spent during the measured run, when /proc is readable. */
  serverMicros?: { postgres: number; redis: number };
  warnings: string[];
}

const CASES: CaseSpec[] = [
  {
    id: '0', label: '(0) bare route, no module', app: 'bare', path: '/orders',
    keys: () => () => `bare-${RUN}`, measuredPrefix: `bare-${RUN}`,
  },
  {
    id: 'a', label: '(a) no interceptor (@SkipIdempotency)', app: 'redis', path: '/plain',
    keys: () => () => `plain-${RUN}`, measuredPrefix: `plain-${RUN}`,
  },
  {
    id: 'b', label: '(b) first-time keys', app: 'redis', path: '/orders',
    keys: (phase) => counterKeys(`new-${RUN}-${phase}-`, 1), measuredPrefix: `new-${RUN}-m-`,
  },
  {
    id: 'c', label: '(c) replays from Redis', app: 'redis', path: '/orders',
    keys: () => () => `replay-${RUN}`, measuredPrefix: `replay-${RUN}`,
    prepare: (port) => completeOnce(port, `replay-${RUN}`),
  },
  {
    id: 'd', label: '(d) replays, redis: false', app: 'pg', path: '/orders',
    keys: () => () => `replay-pg-${RUN}`, measuredPrefix: `replay-pg-${RUN}`,
    prepare: (port) => completeOnce(port, `replay-pg-${RUN}`),
  },
  {
    id: 'e', label: `(e) ${DUP_GROUP}-way concurrent duplicates`, app: 'redis', path: '/orders',
    keys: (phase) => counterKeys(`dup-${RUN}-${phase}-`, DUP_GROUP), measuredPrefix: `dup-${RUN}-m-`,
  },
  {
    id: 'f', label: '(f) @node-idempotency/nestjs (Redis only), first-time keys', app: 'peer', path: '/orders',
    keys: (phase) => counterKeys(`peer-new-${RUN}-${phase}-`, 1), measuredPrefix: `peer-new-${RUN}-m-`,
  },
  {
    id: 'g', label: '(g) @node-idempotency/nestjs (Redis only), replays', app: 'peer', path: '/orders',
    keys: () => () => `peer-replay-${RUN}`, measuredPrefix: `peer-replay-${RUN}`,
    prepare: (port) => completeOnce(port, `peer-replay-${RUN}`),
  },
  {
    // The key (d) replays: the record it reads is there once (d) has prepared it.
    id: 'h', label: '(h) floor of (d): one prepared SELECT per request', app: 'floor', path: '/orders',
    keys: () => () => `replay-pg-${RUN}`, measuredPrefix: `replay-pg-${RUN}`,
  },
  {
    id: 'i', label: '(i) no interceptor, handler inserts a row', app: 'redis', path: '/plain-insert',
    keys: () => () => `plain-insert-${RUN}`, measuredPrefix: `plain-insert-${RUN}`,
  },
  {
    id: 'j', label: '(j) first-time keys, handler inserts a row', app: 'redis', path: '/orders-insert',
    keys: (phase) => counterKeys(`ins-${RUN}-${phase}-`, 1), measuredPrefix: `ins-${RUN}-m-`,
  },
  {
    id: 'k', label: '(k) first-time keys, insert, transaction: true', app: 'redis', path: '/orders-tx',
    keys: (phase) => counterKeys(`tx-${RUN}-${phase}-`, 1), measuredPrefix: `tx-${RUN}-m-`,
  },
  {
    id: 'o', label: '(o) first-time keys, transaction: true (one commit)', app: 'redis', path: '/orders-one-commit',
    keys: (phase) => counterKeys(`one-${RUN}-${phase}-`, 1), measuredPrefix: `one-${RUN}-m-`,
  },
  {
    id: 'p', label: '(p) floor of (o): its two round trips and one commit, no library', app: 'redis', path: '/one-commit-floor',
    keys: (phase) => counterKeys(`ofloor-${RUN}-${phase}-`, 1), measuredPrefix: `ofloor-${RUN}-m-`,
  },
  {
    id: 'n', label: '(n) floor of (k): its round trips and one commit, no library', app: 'redis', path: '/tx-floor',
    keys: (phase) => counterKeys(`floor-${RUN}-${phase}-`, 1), measuredPrefix: `floor-${RUN}-m-`,
  },
  {
    id: 'l', label: '(l) bare app, route behind a no-op interceptor', app: 'bare', path: '/noop-interceptor',
    keys: () => () => `noop-${RUN}`, measuredPrefix: `noop-${RUN}`,
  },
  {
    id: 'm', label: '(m) pass-through: guarded route, no key', app: 'redis', path: '/orders',
    keys: () => () => undefined, measuredPrefix: `none-${RUN}`,
  },
  {
    id: 'B', label: "(B) = (b) with BENCH_BASE's library", app: 'base', path: '/orders',
    keys: (phase) => counterKeys(`new-base-${RUN}-${phase}-`, 1), measuredPrefix: `new-base-${RUN}-m-`,
  },
  {
    id: 'C', label: "(C) = (c) with BENCH_BASE's library", app: 'base', path: '/orders',
    keys: () => () => `replay-base-${RUN}`, measuredPrefix: `replay-base-${RUN}`,
    prepare: (port) => completeOnce(port, `replay-base-${RUN}`),
  },
  {
    id: 'D', label: "(D) = (d) with BENCH_BASE's library", app: 'basepg', path: '/orders',
    keys: () => () => `replay-basepg-${RUN}`, measuredPrefix: `replay-basepg-${RUN}`,
    prepare: (port) => completeOnce(port, `replay-basepg-${RUN}`),
  },
  {
    id: 'M', label: "(M) = (m) with BENCH_BASE's library", app: 'base', path: '/orders',
    keys: () => () => undefined, measuredPrefix: `none-base-${RUN}`,
  },
  {
    id: 'J', label: "(J) = (j) with BENCH_BASE's library", app: 'base', path: '/orders-insert',
    keys: (phase) => counterKeys(`ins-base-${RUN}-${phase}-`, 1), measuredPrefix: `ins-base-${RUN}-m-`,
  },
  {
    id: 'K', label: "(K) = (k) with BENCH_BASE's library", app: 'base', path: '/orders-tx',
    keys: (phase) => counterKeys(`tx-base-${RUN}-${phase}-`, 1), measuredPrefix: `tx-base-${RUN}-m-`,
  },
];
/** Measured in this order (writes last, so Postgres background work after (b) does not disturb the replays). */
const RUN_ORDER: CaseId[] = (['0', 'l', 'a', 'm', 'M', 'c', 'C', 'g', 'd', 'D', 'h', 'b', 'B', 'o', 'p', 'f', 'e', 'i', 'j', 'J', 'k', 'K', 'n'] as CaseId[])
  .filter((id) => id === '0' || ONLY.length === 0 || ONLY.includes(id))
  .filter((id) => BASE_DIR !== undefined || !['B', 'C', 'D', 'M', 'J', 'K'].includes(id));
/** What (h) reads must exist: (d) prepares it, so (h) brings (d) along. */
if (RUN_ORDER.includes('h') && !RUN_ORDER.includes('d')) RUN_ORDER.splice(RUN_ORDER.indexOf('h'), 0, 'd');

/** Cases that can be measured again in later rounds (BENCH_ROUNDS): their keys are the same in every round. */
const REPEATABLE = new Set<CaseId>(['0', 'a', 'c', 'd', 'g', 'h', 'l', 'm', 'C', 'D', 'M']);

/**
 * One case's rounds as one result: the round of median req/s, with the median server CPU per request of all
 * rounds (each is measured in its own run) and every round's warnings.
 */
function median(runs: CaseResult[]): CaseResult {
  const mid = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor((values.length - 1) / 2)];
  const byRps = [...runs].sort((x, y) => x.rps - y.rps)[Math.floor((runs.length - 1) / 2)];
  const cpuPerRequest = mid(runs.map((r) => r.handler.cpuMicros / Math.max(r.result.requests.total, 1)));
  const servers = runs.map((r) => r.serverMicros);
  const serverPer = (which: 'postgres' | 'redis') => mid(servers.map((m, i) => m![which] / Math.max(runs[i].result.requests.total, 1))) * byRps.result.requests.total;
  return {
    ...byRps,
    handler: { ...byRps.handler, cpuMicros: cpuPerRequest * byRps.result.requests.total },
    serverMicros: servers.every(Boolean) ? { postgres: serverPer('postgres'), redis: serverPer('redis') } : undefined,
    warnings: runs.flatMap((r) => r.warnings),
  };
}

/** Keys `<prefix><n>` with n counting requests, `group` consecutive requests sharing one key. */
function counterKeys(prefix: string, group: number): () => string {
  let n = 0;
  return () => `${prefix}${Math.floor(n++ / group)}`;
}

async function post(port: number, key: string): Promise<Response> {
  return fetch(`http://127.0.0.1:${port}/orders`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: BODY,
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_S * 1000),
  });
}

/** Completes `key` once and checks that a second request replays it. */
async function completeOnce(port: number, key: string): Promise<string[]> {
  const problems: string[] = [];
  const first = await post(port, key);
  await first.arrayBuffer();
  if (first.status !== 201) problems.push(`preparing key "${key}": first request answered ${first.status}, expected 201`);
  const second = await post(port, key);
  await second.arrayBuffer();
  if (second.status !== 201 || second.headers.get('idempotent-replayed') !== 'true') {
    problems.push(`preparing key "${key}": second request answered ${second.status} (replayed: ${second.headers.get('idempotent-replayed')}), expected a 201 replay`);
  }
  return problems;
}

async function stats(port: number, reset = false): Promise<HandlerStatsSnapshot | undefined> {
  const res = await fetch(`http://127.0.0.1:${port}/stats${reset ? '/reset' : ''}`, {
    method: reset ? 'POST' : 'GET',
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_S * 1000),
  });
  if (!res.ok) throw new Error(`GET /stats answered ${res.status}`);
  if (reset) {
    await res.arrayBuffer();
    return undefined;
  }
  return (await res.json()) as HandlerStatsSnapshot;
}

/** Commands Redis has processed so far (INFO commandstats), leaving out the benchmark's own INFO calls. */
async function redisCommands(redis: Redis): Promise<number> {
  const info = await redis.info('commandstats');
  let calls = 0;
  for (const m of info.matchAll(/^cmdstat_(\w+(?:\|\w+)?):calls=(\d+)/gm)) {
    if (m[1] !== 'info') calls += Number(m[2]);
  }
  return calls;
}

async function load(port: number, spec: CaseSpec, phase: Phase, duration: number): Promise<autocannon.Result> {
  const nextKey = spec.keys(phase);
  // Every case builds its requests the same way, so the load generator costs the same in each.
  return await autocannon({
    url: `http://127.0.0.1:${port}`,
    connections: CONNECTIONS,
    // autocannon stops at the first 1 s sample tick after `duration`: half a second less makes the run last exactly `duration`.
    duration: duration - 0.5,
    timeout: REQUEST_TIMEOUT_S,
    requests: [{
      method: 'POST',
      path: spec.path,
      headers: { 'content-type': 'application/json' },
      body: BODY,
      setupRequest: (request) => {
        const key = nextKey();
        return key === undefined ? request : { ...request, headers: { ...request.headers, 'idempotency-key': key } };
      },
    }],
  });
}

/** autocannon drops its connections when time is up; the server still finishes what it had started. */
function settle(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
}

function statusCount(result: autocannon.Result, status: number): number {
  return result.statusCodeStats[String(status)]?.count ?? 0;
}

interface RecordCounts {
  completed: number;
  other: number;
}

async function recordCounts(db: Client, schema: string, keyPrefix: string): Promise<RecordCounts> {
  const { rows } = await db.query<{ completed: string; other: string }>(
    `SELECT count(*) FILTER (WHERE status = 'completed') AS completed, count(*) FILTER (WHERE status <> 'completed') AS other
       FROM "${schema}".idempotency_records WHERE scope = 'http:' AND starts_with(key, $1)`,
    [keyPrefix],
  );
  return { completed: Number(rows[0].completed), other: Number(rows[0].other) };
}

/** Cheap correctness checks after a case; problems are reported as warnings, never as failures. */
async function check(spec: CaseSpec, r: autocannon.Result, handler: HandlerStatsSnapshot, db: Client, schema: string): Promise<string[]> {
  const w: string[] = [];
  const total = r.requests.total;
  const ok = statusCount(r, 201);
  const conflicts = statusCount(r, 409);
  const other = total - ok - conflicts;
  if (r.errors > 0) w.push(`${r.errors} connection errors (${r.timeouts} timeouts)`);
  if (total === 0) w.push('no request completed');
  // Requests still in flight when autocannon stops were handled but not counted: allow one per connection.
  const inFlight = CONNECTIONS;
  switch (spec.id) {
    case '0':
    case 'a':
    case 'i':
    case 'n':
    case 'p':
    case 'l':
    case 'm':
    case 'M':
      if (ok !== total) w.push(`${total - ok} responses other than 201`);
      break;
    case 'f':
      if (ok !== total) w.push(`${total - ok} responses other than 201 (${conflicts} × 409)`);
      if (handler.repeatedKeys > 0) w.push(`the handler ran ${handler.repeatedKeys} times for a key it had already run for`);
      break;
    case 'b':
    case 'B':
    case 'o':
    case 'j':
    case 'k':
    case 'J':
    case 'K': {
      if (ok !== total) w.push(`${total - ok} responses other than 201 (${conflicts} × 409)`);
      if (handler.repeatedKeys > 0) w.push(`the handler ran ${handler.repeatedKeys} times for a key it had already run for`);
      if (handler.calls < ok || handler.calls > ok + inFlight) w.push(`handler ran ${handler.calls} times for ${ok} responses`);
      const rows = await recordCounts(db, schema, spec.measuredPrefix);
      if (rows.completed !== handler.distinctKeys || rows.other > 0) {
        w.push(`Postgres holds ${rows.completed} completed and ${rows.other} other records for ${handler.distinctKeys} handled keys`);
      }
      break;
    }
    case 'c':
    case 'd':
    case 'g':
    case 'h':
    case 'C':
    case 'D':
      if (ok !== total) w.push(`${total - ok} non-201 responses (${conflicts} × 409, ${other} other): every request should replay`);
      if (handler.calls > 0) w.push(`the handler ran ${handler.calls} times; replays must not run it`);
      break;
    case 'e': {
      if (other > 0) w.push(`${other} responses other than 201 and 409`);
      if (handler.repeatedKeys > 0) w.push(`the handler ran twice for ${handler.repeatedKeys} keys: duplicates got through`);
      const groups = Math.ceil((total + inFlight) / DUP_GROUP) + 1;
      if (handler.distinctKeys > groups) w.push(`the handler ran for ${handler.distinctKeys} keys, more than the ${groups} groups sent`);
      const rows = await recordCounts(db, schema, spec.measuredPrefix);
      if (rows.completed !== handler.distinctKeys || rows.other > 0) {
        w.push(`Postgres holds ${rows.completed} completed and ${rows.other} other records for ${handler.distinctKeys} handled keys`);
      }
      break;
    }
  }
  return w;
}

function startServer(config: BenchServerConfig): Promise<{ child: ChildProcess; ports: Record<string, number> }> {
  const child = fork(path.join(__dirname, 'http-bench.server.ts'), [], {
    execArgv: ['-r', 'ts-node/register/transpile-only'],
    env: { ...process.env, BENCH_SERVER_CONFIG: JSON.stringify(config) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the ${config.adapter} bench server did not start within ${SERVER_START_TIMEOUT_MS} ms`));
    }, SERVER_START_TIMEOUT_MS);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the ${config.adapter} bench server exited (${signal ?? code}) before it was ready`));
    });
    child.once('message', (msg: BenchServerMessage) => {
      clearTimeout(timer);
      if (msg.type === 'ready') resolve({ child, ports: msg.ports });
      else reject(new Error(`the ${config.adapter} bench server failed to start:\n${msg.type === 'failed' ? msg.error : msg.type}`));
    });
  });
}

/** Sends `command` to a bench server and waits for its answer of type `reply`. */
function ask(child: ChildProcess, command: BenchServerCommand, reply: BenchServerMessage['type']): Promise<void> {
  return new Promise((resolve) => {
    const onMessage = (msg: BenchServerMessage) => {
      if (msg.type !== reply) return;
      child.off('message', onMessage);
      resolve();
    };
    child.on('message', onMessage);
    child.send(command);
  });
}

/** Runs `measure` under a CPU profile of the server when BENCH_CPU_PROF is set. */
async function profiled<T>(child: ChildProcess, name: string, measure: () => Promise<T>): Promise<T> {
  if (!CPU_PROF_DIR) return measure();
  mkdirSync(CPU_PROF_DIR, { recursive: true });
  await ask(child, { type: 'profile', file: path.join(CPU_PROF_DIR, `${name}.cpuprofile`) }, 'profiling');
  try {
    return await measure();
  } finally {
    await ask(child, { type: 'profiled' }, 'profile-written');
  }
}

function stopServer(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    if (child.connected) child.send('close');
    else child.kill('SIGTERM');
  });
}

const fmt = {
  int: (n: number) => Math.round(n).toLocaleString('en-US'),
  ms: (n: number) => (n >= 100 ? n.toFixed(0) : n.toFixed(1)),
  pct: (n: number) => `${(n * 100).toFixed(0)}%`,
};

/** A Markdown table with aligned columns; columns after the first are right-aligned. */
function markdownTable(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join(' | ')} |`;
  const rule = `|${widths.map((w, i) => (i === 0 ? `:${'-'.repeat(w + 1)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
  return [line(header), rule, ...rows.map(line)].join('\n');
}

interface Prefixes {
  redis: string;
  peer: string;
  base: string;
}

type Schemas = Record<'redis' | 'pg' | 'base' | 'basepg', string>;

async function benchAdapter(adapter: AdapterName, schemas: Schemas, prefixes: Prefixes, db: Client, redis: Redis): Promise<AdapterRun> {
  const postgres = (schema: string) => ({ url: env('DATABASE_URL'), schema, ...(POOL_SIZE ? { poolSize: POOL_SIZE } : {}) });
  const redisOptions: IdempotencyModuleOptions = {
    postgres: postgres(schemas.redis), redis: { url: env('REDIS_URL'), keyPrefix: prefixes.redis }, migrationsRun: true,
  };
  const apps: Record<AppName, BenchAppSpec> = {
    redis: { kind: 'ours', options: redisOptions },
    pg: { kind: 'ours', options: { postgres: postgres(schemas.pg), redis: false, migrationsRun: true } },
    bare: { kind: 'bare' },
    peer: { kind: 'node-idempotency', redisUrl: env('REDIS_URL'), keyPrefix: prefixes.peer },
    floor: { kind: 'floor', databaseUrl: env('DATABASE_URL'), schema: schemas.pg, poolSize: POOL_SIZE ?? DEFAULT_POOL_SIZE },
    base: {
      kind: 'ours', libDir: path.join(BASE_DIR ?? '.', 'lib'),
      options: { postgres: postgres(schemas.base), redis: { url: env('REDIS_URL'), keyPrefix: prefixes.base }, migrationsRun: true },
    },
    basepg: { kind: 'ours', libDir: path.join(BASE_DIR ?? '.', 'lib'), options: { postgres: postgres(schemas.basepg), redis: false, migrationsRun: true } },
  };
  const needed = [...new Set(RUN_ORDER.map((id) => CASES.find((c) => c.id === id)!.app))];
  process.stderr.write(`[bench] ${adapter}: starting the apps (${needed.join(', ')}), one process each\n`);
  const servers = new Map<AppName, ChildProcess>();
  const ports = {} as Record<AppName, number>;
  try {
    // One at a time: the apps that migrate the same database must not race for its lock at startup.
    for (const name of needed) {
      const { child, ports: started } = await startServer({ adapter, apps: { [name]: apps[name] } });
      servers.set(name, child);
      ports[name] = started[name];
    }
    const rounds = new Map<CaseId, CaseResult[]>();
    const warmed = new Set<AppName>();
    for (let round = 0; round < ROUNDS; round++) {
      for (const id of RUN_ORDER) {
        if (round > 0 && !REPEATABLE.has(id)) continue;
        const spec = CASES.find((c) => c.id === id)!;
        const port = ports[spec.app];
        const warnings = spec.prepare && round === 0 ? await spec.prepare(port) : [];
        // The first case of each process also warms it up (JIT), so it gets two more seconds.
        await load(port, spec, 'w', warmed.has(spec.app) ? WARMUP_S : WARMUP_S + 2);
        warmed.add(spec.app);
        await settle(); // requests cut off at the end of the warm-up must not be counted in the measured run
        await stats(port, true);
        const redisBefore = await redisCommands(redis);
        const serversBefore = serverCpu();
        const result = await profiled(servers.get(spec.app)!, `${adapter}-${spec.id}${round > 0 ? `-${round + 1}` : ''}`, () => load(port, spec, 'm', DURATION_S));
        const serversAfter = serverCpu();
        await settle();
        const handler = (await stats(port))!;
        const redisCalls = (await redisCommands(redis)) - redisBefore;
        const serverMicros = serversBefore && serversAfter
          ? { postgres: serversAfter.postgres - serversBefore.postgres, redis: serversAfter.redis - serversBefore.redis }
          : undefined;
        warnings.push(...(await check(spec, result, handler, db, spec.app in schemas ? schemas[spec.app as keyof Schemas] : schemas.redis)));
        const rps = result.requests.total / result.duration;
        rounds.set(id, [...(rounds.get(id) ?? []), { spec, result, rps, handler, redisCalls, serverMicros, warnings }]);
        process.stderr.write(`[bench] ${adapter} ${spec.label}${ROUNDS > 1 ? ` (round ${round + 1})` : ''}: ${fmt.int(rps)} req/s, ${fmt.int(handler.cpuMicros / Math.max(result.requests.total, 1))} µs CPU/req\n`);
      }
    }
    const results = [...rounds.values()].map(median);
    // The baseline once more, to show how much the machine drifted during the run.
    const spec = CASES.find((c) => c.id === '0')!;
    const again = await load(ports[spec.app], spec, 'm', DURATION_S);
    await settle();
    return { results: results.sort((x, y) => x.spec.id.localeCompare(y.spec.id)), baselineAgain: again };
  } finally {
    await Promise.all([...servers.values()].map(stopServer));
  }
}

const DRIFT_WARNING = 0.15;

function report(adapter: AdapterName, { results, baselineAgain }: AdapterRun): void {
  const bare = results.find((r) => r.spec.id === '0')!;
  const base = bare.rps;
  const cpuPer = (r: CaseResult) => r.handler.cpuMicros / Math.max(r.result.requests.total, 1);
  const row = (label: string, result: autocannon.Result) => {
    const rps = result.requests.total / result.duration;
    const s201 = statusCount(result, 201);
    const s409 = statusCount(result, 409);
    return [
      label, fmt.int(rps), fmt.pct(rps / base), fmt.ms(result.latency.p50), fmt.ms(result.latency.p99),
      fmt.int(result.requests.total), fmt.int(s201), fmt.int(s409), fmt.int(result.requests.total - s201 - s409), fmt.int(result.errors),
    ];
  };
  const rows = [...results.map(({ spec, result }) => row(spec.label, result)), row('(0) again, after the others', baselineAgain)];
  // Server CPU per request is far less sensitive to other load on a shared machine than req/s.
  // The servers' CPU, from /proc: what a case costs Postgres and Redis, which share the machine's cores with the app.
  const serverPer = (r: CaseResult, which: 'postgres' | 'redis') => (r.serverMicros ? fmt.int(r.serverMicros[which] / Math.max(r.result.requests.total, 1)) : '');
  results.forEach((r, i) => rows[i].push(fmt.int(cpuPer(r)), fmt.int(cpuPer(r) - cpuPer(bare)), serverPer(r, 'postgres'), serverPer(r, 'redis')));
  rows[rows.length - 1].push('', '', '', '');
  const name = adapter === 'express' ? 'Express' : 'Fastify';
  process.stdout.write(`\n### ${name}\n\n`);
  process.stdout.write(`${markdownTable(['Case', 'req/s', 'vs (0)', 'p50 ms', 'p99 ms', 'requests', '201', '409', 'other', 'errors', 'CPU µs/req', 'over (0)', 'Postgres µs/req', 'Redis µs/req'], rows)}\n`);
  const drift = baselineAgain.requests.total / baselineAgain.duration / base - 1;
  const warnings = results.flatMap((r) => r.warnings.map((w) => `${r.spec.label}: ${w}`));
  const per = (n: number, total: number) => (total > 0 ? (n / total).toFixed(2) : '-');
  const trips = results.map(({ spec, result, handler, redisCalls }) => {
    const total = result.requests.total;
    const q = handler.queries;
    const other = Object.entries(q).filter(([k]) => !SHOWN_STATEMENTS.has(k)).reduce((sum, [, n]) => sum + n, 0);
    const pg = (n: number) => (handler.counting ? per(n, total) : 'n/a');
    const redisTrips = Object.values(handler.redisCommands).reduce((sum, n) => sum + n, 0);
    return [
      spec.label, per(handler.calls, total), pg((q.claim ?? 0) + (q.claimBatch ?? 0)), pg((q.complete ?? 0) + (q.completeBatch ?? 0)), pg(other),
      handler.counting ? per(redisTrips, total) : 'n/a', per(redisCalls, total),
    ];
  });
  process.stdout.write(`\nRound trips per request (counted on the module's pool and Redis client; a statement shared by the claims or completions of one event-loop turn counts once; Redis-side commands include those run inside scripts):\n\n`);
  process.stdout.write(`${markdownTable(['Case', 'handler runs', 'pg claim', 'pg complete', 'pg other', 'Redis calls', 'Redis-side cmds'], trips)}\n`);
  const prepared = results.filter((r) => (r.spec.id === 'b' || r.spec.id === 'd') && r.handler.counting).map(({ spec, handler }) => {
    const p = handler.preparedPerConnection;
    return `after (${spec.id}) ${p.length} pool connections with ${p.length > 0 ? `${Math.min(...p)}–${Math.max(...p)}` : '0'} named statements prepared on each`;
  });
  if (prepared.length > 0) process.stdout.write(`\nPostgres pool: ${prepared.join('; ')}.\n`);
  const insertBase = results.find((r) => r.spec.id === 'i')?.rps;
  if (insertBase) {
    const ratio = (id: CaseId) => {
      const r = results.find((x) => x.spec.id === id);
      return r ? `${id} ${(r.rps / insertBase).toFixed(2)}` : `${id} -`;
    };
    process.stdout.write(`\nFirst-time keys whose handler inserts one row, as a ratio to (i) (the same insert without the interceptor): ${ratio('j')} (claim, insert, completion: three commits), ${ratio('k')} (transaction: true), ${ratio('n')} (the floor of (k): its statements and one commit without the library)`);
    const base = results.some((r) => r.spec.id === 'J' || r.spec.id === 'K') ? `; with BENCH_BASE's library: ${ratio('J')}, ${ratio('K')}` : '';
    process.stdout.write(`${base}.\n`);
  }
  process.stdout.write(`${goalsLine(adapter, results)}\n`);
  if (Math.abs(drift) > DRIFT_WARNING) {
    process.stdout.write(`WARNING ${name}: (0) changed by ${fmt.pct(drift)} between its two runs; the machine's speed varied (other load?), so compare the ratios with care.\n`);
  }
  for (const w of warnings) process.stdout.write(`WARNING ${name} ${w}\n`);
  if (warnings.length === 0) process.stdout.write('Checks passed: no errors, replays all 201 without running the handler, one record and one handler run per key.\n');
}

/**
 * Issue 9's and issue 8's goals for this adapter against this run: each ratio, and whether it is met (a case left
 * out by BENCH_CASES is "not run"). Issue 9's peer goal "at or above the fastest peer that keeps a durable record"
 * has no case: the in-run peer keeps none.
 */
function goalsLine(adapter: AdapterName, results: CaseResult[]): string {
  const find = (id: CaseId) => results.find((r) => r.spec.id === id);
  const goal = (label: string, id: CaseId, over: CaseId, atLeast: number, floor?: CaseId) => {
    const a = find(id);
    const b = find(over);
    if (a === undefined || b === undefined) return `${label} ≥ ${atLeast.toFixed(2)}: not run`;
    const ratio = a.rps / b.rps;
    // three decimals: the verdict is taken on the ratio itself, and 0.899 must not read as 0.90
    const warned = a.warnings.length + b.warnings.length > 0 ? ', with check warnings: see below' : '';
    // The same statements without the library: no design with them can pass a goal its floor misses.
    const f = floor === undefined ? undefined : find(floor);
    const bound = f === undefined ? '' : `, its floor (${floor})/(${over}) ${(f.rps / b.rps).toFixed(3)}`;
    return `${label} ≥ ${atLeast.toFixed(2)} → ${ratio.toFixed(3)} (${ratio >= atLeast ? 'met' : 'NOT met'}${bound}${warned})`;
  };
  const express = adapter === 'express';
  const issue9 = express
    ? [goal('(c)/(0) Redis replays', 'c', '0', 0.9), goal('(b)/(0) first-time keys', 'b', '0', 0.4), goal('(o)/(0) first-time keys, transaction: true', 'o', '0', 0.55, 'p')]
    : [goal('(c)/(0) Redis replays', 'c', '0', 0.55), goal('(d)/(0) Postgres-only replays', 'd', '0', 0.3)];
  issue9.push(goal('(c)/(g) replays against the Redis-only peer', 'c', 'g', 0.95));
  const issue8 = goal('(k)/(i) transactional first-time keys with an insert', 'k', 'i', express ? 0.8 : 0.6, 'n');
  return `\nGoals in this run — issue 9: ${issue9.join('; ')}. Issue 8: ${issue8}.`;
}

async function cleanup(db: Client, redis: Redis, schemas: string[], prefixes: string[]): Promise<void> {
  for (const schema of schemas) await db.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  for (const prefix of prefixes) await deleteRedisKeys(redis, `${prefix}:*`);
}

async function main(): Promise<void> {
  startWatchdog(WATCHDOG_MS);
  const { db, redis } = await connectBench();
  const settings = await db.query<{ name: string; setting: string }>(
    `SELECT name, setting FROM pg_settings WHERE name IN ('server_version', 'fsync', 'synchronous_commit', 'full_page_writes', 'wal_sync_method', 'commit_delay', 'commit_siblings', 'max_connections')`,
  );
  const pg = Object.fromEntries(settings.rows.map((r) => [r.name, r.setting]));
  process.stdout.write(
    `HTTP benchmark (run ${RUN}): node ${process.version}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), ` +
    `Postgres ${pg.server_version} (fsync=${pg.fsync}, synchronous_commit=${pg.synchronous_commit}, wal_sync_method=${pg.wal_sync_method}, ` +
    `commit_delay=${pg.commit_delay} µs, commit_siblings=${pg.commit_siblings}, max_connections=${pg.max_connections}), ` +
    `pool size ${POOL_SIZE ?? `default (${DEFAULT_POOL_SIZE})`}\n` +
    `load average at start: ${os.loadavg().map((n) => n.toFixed(2)).join(' ')}\n` +
    `autocannon: ${CONNECTIONS} connections, ${WARMUP_S} s warm-up + ${DURATION_S} s measured per case, POST ${BODY.length}-byte JSON; ` +
    `server in its own process, loopback only\n`,
  );

  const allSchemas: string[] = [];
  const allPrefixes: string[] = [];
  try {
    for (const adapter of ADAPTERS) {
      const schemas: Schemas = {
        redis: `bench_${RUN}_${adapter}_r`, pg: `bench_${RUN}_${adapter}_p`, base: `bench_${RUN}_${adapter}_br`, basepg: `bench_${RUN}_${adapter}_bp`,
      };
      const prefixes = { redis: `idem-bench-${RUN}-${adapter}`, peer: `idem-bench-${RUN}-${adapter}-peer`, base: `idem-bench-${RUN}-${adapter}-base` };
      allSchemas.push(...Object.values(schemas));
      allPrefixes.push(...Object.values(prefixes));
      report(adapter, await benchAdapter(adapter, schemas, prefixes, db, redis));
    }
  } finally {
    if (!KEEP) await cleanup(db, redis, allSchemas, allPrefixes).catch((err: unknown) => process.stderr.write(`[bench] cleanup failed: ${String(err)}\n`));
    await db.end();
    redis.disconnect();
  }
}

runBench(main);
