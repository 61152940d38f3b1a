// Counts what the benchmark process sends to Postgres (queries, through pg's Client) and Redis (commands, through
// ioredis), plus its own CPU time: per-step figures that, unlike steps/s, do not move with the machine's load.
import { readdirSync, readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import Redis from 'ioredis';
import { Client } from 'pg';

/** What the process sent and spent between two readings. */
export interface Counts {
  postgres: number;
  redis: number;
  cpuMicros: number;
  /** CPU µs of every `postgres` / `redis-server` process of this machine (Linux /proc), undefined where unreadable. */
  serverMicros?: { postgres: number; redis: number };
  at: number;
}

let postgres = 0;
let redis = 0;
let installed = false;

/** Wraps pg's `Client.query` and ioredis's `sendCommand` once, to count every call of this process. */
export function installRoundTripCounter(): void {
  if (installed) return;
  installed = true;
  const clientProto = Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const query = clientProto.query;
  clientProto.query = function (this: unknown, ...args: unknown[]) {
    postgres++;
    return query.apply(this, args);
  };
  const redisProto = Redis.prototype as unknown as { sendCommand: (...args: unknown[]) => unknown };
  const sendCommand = redisProto.sendCommand;
  redisProto.sendCommand = function (this: unknown, ...args: unknown[]) {
    redis++;
    return sendCommand.apply(this, args);
  };
}

/** The counts so far. */
export function readCounts(): Counts {
  const cpu = process.cpuUsage();
  return { postgres, redis, cpuMicros: cpu.user + cpu.system, serverMicros: serverCpu(), at: performance.now() };
}

/** Per unit of work: Postgres statements, Redis commands and CPU µs of this process, and of the servers when readable. */
export interface UnitCost {
  postgres: number;
  redis: number;
  cpuMicros: number;
  server?: { postgres: number; redis: number };
}

/** Postgres statements, Redis commands and CPU µs of this process (and of the servers) per unit of work since `from`. */
export function perUnit(from: Counts, units: number): UnitCost {
  const now = readCounts();
  const cost: UnitCost = { postgres: (now.postgres - from.postgres) / units, redis: (now.redis - from.redis) / units, cpuMicros: (now.cpuMicros - from.cpuMicros) / units };
  if (from.serverMicros && now.serverMicros) {
    cost.server = { postgres: (now.serverMicros.postgres - from.serverMicros.postgres) / units, redis: (now.serverMicros.redis - from.serverMicros.redis) / units };
  }
  return cost;
}

/** Microseconds per clock tick of /proc/<pid>/stat (USER_HZ, 100 on Linux). */
const TICK_MICROS = 10_000;

/**
 * The CPU time so far of the processes named `postgres` (the server and its backends) and `redis-server` on this
 * machine, from /proc (undefined elsewhere). Meaningful when the servers run here, as `npm run bench:*` starts them,
 * and nothing else uses them: every such process is counted, with the children it reaped (a backend or an autovacuum
 * worker that exited is counted in the postmaster's figures once reaped).
 */
export function serverCpu(): { postgres: number; redis: number } | undefined {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return undefined;
  }
  const total = { postgres: 0, redis: 0 };
  for (const pid of entries) {
    if (!/^\d+$/.test(pid)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const which = name === 'postgres' ? 'postgres' : name === 'redis-server' ? 'redis' : undefined;
    if (!which) continue;
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime + stime, and cutime + cstime: the CPU of children that exited and were reaped (backends and autovacuum
    // workers of the postmaster, a save's fork of Redis), which would otherwise drop out of the sum.
    total[which] += (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) * TICK_MICROS;
  }
  return total;
}
