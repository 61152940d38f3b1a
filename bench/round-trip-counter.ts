// Counts what the benchmark process sends to Postgres (queries, through pg's Client) and Redis (commands, through
// ioredis), plus its own CPU time: per-step figures that, unlike steps/s, do not move with the machine's load.
import { performance } from 'node:perf_hooks';
import Redis from 'ioredis';
import { Client } from 'pg';

/** What the process sent and spent between two readings. */
export interface Counts {
  postgres: number;
  redis: number;
  cpuMicros: number;
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
  return { postgres, redis, cpuMicros: cpu.user + cpu.system, at: performance.now() };
}

/** Postgres statements, Redis commands and CPU µs of this process per unit of work since `from`. */
export function perUnit(from: Counts, units: number): { postgres: number; redis: number; cpuMicros: number } {
  const now = readCounts();
  return { postgres: (now.postgres - from.postgres) / units, redis: (now.redis - from.redis) / units, cpuMicros: (now.cpuMicros - from.cpuMicros) / units };
}
