import type { ChildProcess } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

/** A server process started by a test; stop it with the helpers below, never by name. */
export interface StartedRedis {
  url: string;
  port: number;
  proc: ChildProcess;
}

export interface StartedPostgres {
  url: string;
  proc: ChildProcess;
  /** The name given to startPostgres: its data lives under .data/<name>. */
  name: string;
}

/** A Redis Cluster started by a test: its startup nodes and one process per master. */
export interface StartedRedisCluster {
  nodes: { host: string; port: number }[];
  procs: ChildProcess[];
}

interface ServicesModule {
  startRedis(name: string, fixedPort?: number): Promise<StartedRedis>;
  startRedisCluster(name: string, masters?: number): Promise<StartedRedisCluster>;
  startPostgres(name: string): Promise<{ url: string; proc: ChildProcess }>;
  stop(proc: ChildProcess | undefined, signal?: NodeJS.Signals): Promise<void>;
  ROOT: string;
}

// eslint-disable-next-line @typescript-eslint/no-require-imports
const services = require('../../scripts/services') as ServicesModule;

/** Starts a dedicated redis-server on 127.0.0.1 (on `port` when given, e.g. to restart on the same port). */
export function startRedis(name: string, port?: number): Promise<StartedRedis> {
  return services.startRedis(name, port);
}

/** Stops a redis-server this test started; SIGKILL simulates a crash. */
export function stopRedis(redis: StartedRedis | undefined, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  return services.stop(redis?.proc, signal);
}

/** Starts a 3-master Redis Cluster on 127.0.0.1 (data under .data/<name>/cluster). */
export function startRedisCluster(name: string): Promise<StartedRedisCluster> {
  return services.startRedisCluster(name, 3);
}

/** Stops every node of a Redis Cluster this test started (by PID) and removes its data. */
export async function stopRedisCluster(cluster: StartedRedisCluster | undefined, name: string): Promise<void> {
  await Promise.all((cluster?.procs ?? []).map((proc) => services.stop(proc, 'SIGKILL')));
  removeServiceData(name);
}

/** Starts a dedicated Postgres on 127.0.0.1 with its own data directory under .data/<name>. */
export async function startPostgres(name: string): Promise<StartedPostgres> {
  const started = await services.startPostgres(name);
  return { ...started, name };
}

/**
 * Stops a Postgres this test started. When the tests run as root the server runs under `runuser`,
 * which does not forward signals, so the postmaster is signalled by the PID in its own pid file.
 */
export async function stopPostgres(pg: StartedPostgres | undefined, { removeData = false } = {}): Promise<void> {
  if (!pg) return;
  const dataDir = join(services.ROOT, '.data', pg.name);
  let postmaster: number | undefined;
  try {
    postmaster = Number(readFileSync(join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    postmaster = undefined;
  }
  if (postmaster && Number.isInteger(postmaster) && postmaster > 0) {
    try {
      process.kill(postmaster, 'SIGINT'); // fast shutdown: ends sessions and stops
    } catch {
      // already gone
    }
  }
  await services.stop(pg.proc, 'SIGINT');
  if (removeData) rmSync(dataDir, { recursive: true, force: true });
}

/** Removes the data a dedicated Redis left under .data/<name>. */
export function removeServiceData(name: string): void {
  rmSync(join(services.ROOT, '.data', name), { recursive: true, force: true });
}
