// The Nest application context the guard benchmark drives: one provider with a trivial async method,
// once bare and once behind @IdempotentMethod(), counters of its runs for the checks, and counters of
// the module's round trips (queries on its Postgres pool, commands on its Redis client).
import 'reflect-metadata';
import { INestApplicationContext, Injectable, Module, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type Redis from 'ioredis';
import type { Pool } from 'pg';
import { IdempotencyModule, IdempotencyModuleOptions, IdempotentMethod } from '../lib';
import { IdempotencyConnections } from '../lib/storage/idempotency-connections';

/** What a call of either method returns: its argument and the method's run number in this app. */
export interface GuardBenchResult {
  arg: string;
  run: number;
}

/** Runs of one method: how many, and how many for an argument it had already run for (must stay 0 when guarded). */
export interface MethodRuns {
  runs: number;
  repeated: number;
}

@Injectable()
export class GuardBenchService {
  /** Runs of `guarded` over the app's lifetime (every distinct argument it ran for, and repeats). */
  readonly guardedTotal: MethodRuns = { runs: 0, repeated: 0 };
  /** Runs since the last reset (one phase of one case). */
  guardedPhase: MethodRuns = { runs: 0, repeated: 0 };
  plainRuns = 0;
  private readonly seen = new Set<string>();

  /** (a): the bare method, no decorator. */
  // eslint-disable-next-line @typescript-eslint/require-await
  async plain(arg: string): Promise<GuardBenchResult> {
    return { arg, run: ++this.plainRuns };
  }

  /** (c)–(f): the same method behind the guard, with the default key (method name + hash of the arguments). */
  @IdempotentMethod()
  // eslint-disable-next-line @typescript-eslint/require-await
  async guarded(arg: string): Promise<GuardBenchResult> {
    this.guardedTotal.runs++;
    this.guardedPhase.runs++;
    if (this.seen.has(arg)) {
      this.guardedTotal.repeated++;
      this.guardedPhase.repeated++;
    } else {
      this.seen.add(arg);
    }
    return { arg, run: this.guardedTotal.runs };
  }

  resetPhase(): void {
    this.guardedPhase = { runs: 0, repeated: 0 };
    this.plainRuns = 0;
  }
}

/** The module's round trips since the last reset, counted client-side. */
export class RoundTrips {
  /** Postgres queries by statement (`claim`, `complete`, …; `unnamed` for ad-hoc text). */
  queries: Record<string, number> = {};
  /** Redis commands by name (a script counts once, as one round trip). */
  redis: Record<string, number> = {};

  reset(): void {
    this.queries = {};
    this.redis = {};
  }

  snapshot(): { queries: Record<string, number>; redis: Record<string, number> } {
    return { queries: { ...this.queries }, redis: { ...this.redis } };
  }
}

export interface GuardBenchContext {
  app: INestApplicationContext;
  service: GuardBenchService;
  /** The module's own pool and Redis client (undefined when the module's internals could not be reached). */
  pool?: Pool;
  redis?: Redis;
  trips: RoundTrips;
  /** False when the module's connections could not be found, so round trips were not counted. */
  counting: boolean;
}

function guardBenchModule(options: IdempotencyModuleOptions): Type<unknown> {
  @Module({
    imports: [IdempotencyModule.forRoot(options)],
    providers: [GuardBenchService],
  })
  class GuardBenchModule {}
  return GuardBenchModule;
}

/** Wraps the pool's `query` and the client's `sendCommand` to count round trips (same small cost in every case). */
function countRoundTrips(pool: Pool, redis: Redis | undefined, trips: RoundTrips): void {
  const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  (pool as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    const config = args[0] as { name?: string } | string;
    const name = typeof config === 'object' && config.name ? config.name.replace(/^idem_(\w+)_[0-9a-f]{8}$/, '$1') : 'unnamed';
    trips.queries[name] = (trips.queries[name] ?? 0) + 1;
    return query(...args);
  };
  const client = redis as unknown as { sendCommand?: (command: { name: string }, ...rest: unknown[]) => unknown } | undefined;
  if (client?.sendCommand) {
    const send = client.sendCommand.bind(client);
    client.sendCommand = (command: { name: string }, ...rest: unknown[]) => {
      trips.redis[command.name] = (trips.redis[command.name] ?? 0) + 1;
      return send(command, ...rest);
    };
  }
}

/** A Nest application context (no HTTP server), logger off, with the idempotency module configured by `options`. */
export async function startGuardBenchContext(options: IdempotencyModuleOptions): Promise<GuardBenchContext> {
  const app = await NestFactory.createApplicationContext(guardBenchModule(options), { logger: false, abortOnError: false });
  await app.init();
  const service = app.get(GuardBenchService);
  const trips = new RoundTrips();
  let pool: Pool | undefined;
  let redis: Redis | undefined;
  try {
    const connections = app.get(IdempotencyConnections, { strict: false });
    pool = connections.pool;
    redis = connections.redis as Redis | undefined; // the benchmark runs on a standalone Redis
  } catch {
    // the module's internals changed: the report shows no round-trip counts
  }
  if (pool) countRoundTrips(pool, redis, trips);
  return { app, service, pool, redis, trips, counting: pool !== undefined };
}
