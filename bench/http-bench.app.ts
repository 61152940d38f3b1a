// The Nest apps the HTTP benchmark drives, each in its own process: a trivial POST handler behind this
// library's interceptor (and the same handler on a @SkipIdempotency() route), the bare route without any
// module (the baseline the ratios are taken to), the same route behind @node-idempotency/nestjs with its Redis
// adapter (the fastest peer), and the floor of a Postgres-only replay: one prepared indexed SELECT per request.
import 'reflect-metadata';
import {
  Body, CallHandler, Controller, ExecutionContext, Get, Headers, HttpCode, INestApplication, Injectable, Module, NestInterceptor, OnApplicationBootstrap,
  OnApplicationShutdown, Post, Type, UseInterceptors,
} from '@nestjs/common';
import type { Observable } from 'rxjs';
import { ModuleRef, NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Pool } from 'pg';
import type { QueryRunner } from 'typeorm';
import { currentTransaction, Idempotent, IdempotencyModule, IdempotencyModuleOptions, SkipIdempotency } from '../lib';
import { IdempotencyConnections } from '../lib/storage/idempotency-connections';

export type AdapterName = 'express' | 'fastify';

/** What one bench process serves on `POST /orders`. */
export type BenchAppSpec =
  /**
   * This library's module (the interceptor acts on /orders; /plain skips it); `libDir`: another checkout's `lib`
   * (e.g. main's, for before/after figures in one run), loaded in place of this one's.
   */
  | { kind: 'ours'; options: IdempotencyModuleOptions; libDir?: string }
  /** No module at all: the leanest app serving the same route. */
  | { kind: 'bare' }
  /** @node-idempotency/nestjs with its Redis storage adapter, its @Idempotent() on the route. */
  | { kind: 'node-idempotency'; redisUrl: string; keyPrefix: string }
  /** The route runs one prepared indexed SELECT on the record table (a pg pool of `poolSize`) and answers. */
  | { kind: 'floor'; databaseUrl: string; schema: string; poolSize: number };

/**
 * What the handler saw: how often it ran, and how often it ran twice for one key (which must never happen);
 * and the module's Postgres queries by statement (`claim`, `complete`, …), counted on its pool.
 */
export interface HandlerStatsSnapshot {
  calls: number;
  distinctKeys: number;
  repeatedKeys: number;
  queries: Record<string, number>;
  /** The module's Redis commands by name (one round trip each; a script counts once). */
  redisCommands: Record<string, number>;
  /** Open pool connections, and how many named statements each has prepared. */
  preparedPerConnection: number[];
  /** False when the module's pool could not be found, so queries were not counted. */
  counting: boolean;
  /** CPU time (user + system) this server process used since the last reset, in µs: less sensitive to other load than req/s. */
  cpuMicros: number;
}

@Injectable()
class HandlerStats {
  private calls = 0;
  private repeated = 0;
  private keys = new Set<string>();
  private queries: Record<string, number> = {};
  pool?: Pool;

  private redisCommands: Record<string, number> = {};
  private cpuSince = process.cpuUsage();

  query(name: string): void {
    this.queries[name] = (this.queries[name] ?? 0) + 1;
  }

  redisCommand(name: string): void {
    this.redisCommands[name] = (this.redisCommands[name] ?? 0) + 1;
  }

  record(key: string | undefined): void {
    this.calls++;
    if (key === undefined) return;
    if (this.keys.has(key)) this.repeated++;
    else this.keys.add(key);
  }

  snapshot(): HandlerStatsSnapshot {
    // pg keeps what each connection has prepared in connection.parsedStatements (internal, read for the report only).
    const clients = (this.pool as unknown as { _clients?: { connection?: { parsedStatements?: object } }[] } | undefined)?._clients ?? [];
    return {
      calls: this.calls,
      distinctKeys: this.keys.size,
      repeatedKeys: this.repeated,
      queries: { ...this.queries },
      redisCommands: { ...this.redisCommands },
      preparedPerConnection: clients.map((c) => Object.keys(c.connection?.parsedStatements ?? {}).length),
      counting: this.pool !== undefined,
      cpuMicros: ((used) => used.user + used.system)(process.cpuUsage(this.cpuSince)),
    };
  }

  reset(): void {
    this.calls = 0;
    this.repeated = 0;
    this.keys = new Set();
    this.queries = {};
    this.redisCommands = {};
    this.cpuSince = process.cpuUsage();
  }
}

interface OrderBody {
  amount?: number;
  currency?: string;
}

let nextId = 0;

function respond(body: OrderBody | undefined): { id: number; status: string; amount: number | null } {
  return { id: ++nextId, status: 'accepted', amount: body?.amount ?? null };
}

/** The optional per-request work of the measured route (the floor's SELECT), and a hook run at shutdown. */
@Injectable()
class RouteWork {
  run?: (key: string | undefined) => Promise<void>;
  close?: () => Promise<void>;
}

/** An interceptor that does nothing: what Nest itself charges for running a route through any interceptor. */
class NoopInterceptor implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle();
  }
}

/** The controller of every bench app; `decorate` is applied to the measured route (a peer's own decorator). */
function benchController(decorate?: MethodDecorator): Type<unknown> {
  @Controller()
  class BenchController {
    constructor(private readonly stats: HandlerStats, private readonly work: RouteWork) {}

    /** The measured route: POST, so the interceptor acts on it whenever an Idempotency-Key is sent. */
    @Post('orders')
    create(@Headers('idempotency-key') key: string | undefined, @Body() body: OrderBody | undefined) {
      if (this.work.run) return this.work.run(key).then(() => respond(body));
      this.stats.record(key);
      return respond(body);
    }

    /** The same handler behind a no-op interceptor: the cost of Nest's interceptor chain, without any library. */
    @Post('noop-interceptor')
    @SkipIdempotency()
    @UseInterceptors(NoopInterceptor)
    noopInterceptor(@Headers('idempotency-key') key: string | undefined, @Body() body: OrderBody | undefined) {
      this.stats.record(key);
      return respond(body);
    }

    /** The baseline: the same handler with the interceptor skipped. */
    @Post('plain')
    @SkipIdempotency()
    plain(@Headers('idempotency-key') key: string | undefined, @Body() body: OrderBody | undefined) {
      this.stats.record(key);
      return respond(body);
    }

    @Get('stats')
    @SkipIdempotency()
    snapshot(): HandlerStatsSnapshot {
      return this.stats.snapshot();
    }

    @Post('stats/reset')
    @SkipIdempotency()
    @HttpCode(204)
    reset(): void {
      this.stats.reset();
    }
  }
  if (decorate) {
    const descriptor = Object.getOwnPropertyDescriptor(BenchController.prototype, 'create')!;
    decorate(BenchController.prototype, 'create', descriptor);
  }
  return BenchController;
}

/** The table the insert cases write one row per request to, in the module's database and schema. */
const ROWS_TABLE = 'bench_rows';
/** The claim rows of (n), the floor of (k): the transactional mode's statement pattern without the library. */
const FLOOR_CLAIMS_TABLE = 'bench_floor_claims';

/** What the insert routes take from a library: this checkout's, or BENCH_BASE's (before/after in one run). */
interface InsertLib {
  Idempotent: typeof Idempotent;
  SkipIdempotency: typeof SkipIdempotency;
  currentTransaction: typeof currentTransaction;
  IdempotencyConnections: typeof IdempotencyConnections;
}

/**
 * Routes of `lib`'s app whose handler inserts one row: (i) without the interceptor, (j) behind it, (k) transactional,
 * (n) the floor of (k); (o), the transactional mode on (b)'s trivial handler, and (p) its floor.
 */
function insertController(lib: InsertLib): Type<unknown> {
  @Controller()
  class InsertController implements OnApplicationBootstrap {
    private rowsTable = '';

    constructor(
      private readonly stats: HandlerStats,
      private readonly moduleRef: ModuleRef,
    ) {}

    private get connections(): IdempotencyConnections {
      return this.moduleRef.get(lib.IdempotencyConnections, { strict: false });
    }

    async onApplicationBootstrap(): Promise<void> {
      this.rowsTable = `"${this.connections.schema}".${ROWS_TABLE}`;
      await this.connections.dataSource.query(`CREATE TABLE IF NOT EXISTS ${this.rowsTable} (id bigserial PRIMARY KEY, key text, amount int)`);
      await this.connections.dataSource.query(`CREATE TABLE IF NOT EXISTS "${this.connections.schema}".${FLOOR_CLAIMS_TABLE} (key text PRIMARY KEY, done boolean NOT NULL DEFAULT false)`);
    }

    private insertRow(key: string | undefined, body: OrderBody | undefined, via: { query(text: string, values: unknown[]): Promise<unknown> }): Promise<unknown> {
      return via.query(`INSERT INTO ${this.rowsTable} (key, amount) VALUES ($1, $2)`, [key ?? null, body?.amount ?? null]);
    }

    /** (i) The insert baseline: one row per request, no interceptor. */
    @Post('plain-insert')
    @lib.SkipIdempotency()
    async plainInsert(@Headers('idempotency-key') key: string | undefined, @Body() body: OrderBody | undefined) {
      this.stats.record(key);
      await this.insertRow(key, body, this.connections.dataSource);
      return respond(body);
    }

    /** (j) The same insert behind the interceptor, outside any transaction of the library (claim, insert, completion: three commits). */
    @Post('orders-insert')
    async ordersInsert(@Headers('idempotency-key') key: string | undefined, @Body() body: OrderBody | undefined) {
      this.stats.record(key);
      await this.insertRow(key, body, this.connections.dataSource);
      return respond(body);
    }

    /** (k) The same insert in transactional mode: the row commits with the stored response. */
    @Post('orders-tx')
    @lib.Idempotent({ transaction: true })
    async ordersTx(@Headers('idempotency-key') key: string | undefined, @Body() body: OrderBody | undefined) {
      this.stats.record(key);
      await this.insertRow(key, body, lib.currentTransaction());
      return respond(body);
    }

    /** (o) First-time keys on (b)'s trivial handler in transactional mode: the one-commit path, no insert. */
    @Post('orders-one-commit')
    @lib.Idempotent({ transaction: true })
    ordersOneCommit(@Headers('idempotency-key') key: string | undefined, @Body() body: OrderBody | undefined) {
      this.stats.record(key);
      return respond(body);
    }

    /**
     * (n) The floor of (k): its round trips and its one commit, without the library. One pooled connection:
     * START TRANSACTION + a claim row (one round trip), the same insert, the claim row's update + COMMIT (one round trip).
     */
    @Post('tx-floor')
    @lib.SkipIdempotency()
    async txFloor(@Headers('idempotency-key') key: string | undefined, @Body() body: OrderBody | undefined) {
      this.stats.record(key);
      await this.inFloorTransaction(key, (runner) => this.insertRow(key, body, runner));
      return respond(body);
    }

    /** (p) The floor of (o): the same two round trips and one commit without the insert (or the library). */
    @Post('one-commit-floor')
    @lib.SkipIdempotency()
    async oneCommitFloor(@Headers('idempotency-key') key: string | undefined, @Body() body: OrderBody | undefined) {
      this.stats.record(key);
      await this.inFloorTransaction(key);
      return respond(body);
    }

    /** The transactional mode's statement pattern without the library: claim row with the START, `work`, update with the COMMIT. */
    private async inFloorTransaction(key: string | undefined, work?: (runner: QueryRunner) => Promise<unknown>): Promise<void> {
      const claims = `"${this.connections.schema}".${FLOOR_CLAIMS_TABLE}`;
      const literal = `'${(key ?? '').replace(/'/g, "''")}'`;
      const runner = this.connections.dataSource.createQueryRunner();
      await runner.connect();
      try {
        await runner.query(`START TRANSACTION ISOLATION LEVEL READ COMMITTED;\nINSERT INTO ${claims} (key) VALUES (${literal})`);
        if (work) await work(runner);
        await runner.query(`UPDATE ${claims} SET done = true WHERE key = ${literal};\nCOMMIT`);
      } catch (err) {
        await runner.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        await runner.release();
      }
    }
  }
  return InsertController;
}

@Injectable()
class ShutdownHook implements OnApplicationShutdown {
  constructor(private readonly work: RouteWork) {}

  async onApplicationShutdown(): Promise<void> {
    await this.work.close?.();
  }
}

function benchModule(imports: NonNullable<Parameters<typeof Module>[0]>['imports'], decorate?: MethodDecorator, extra: Type<unknown>[] = []): Type<unknown> {
  @Module({
    imports,
    controllers: [benchController(decorate), ...extra],
    providers: [HandlerStats, RouteWork, ShutdownHook],
  })
  class HttpBenchModule {}
  return HttpBenchModule;
}

/** The module of one bench app; the peer is loaded only when asked for (a dev dependency of the benchmark). */
async function moduleFor(spec: BenchAppSpec): Promise<Type<unknown>> {
  switch (spec.kind) {
    case 'ours': {
      if (!spec.libDir) {
        const lib = { Idempotent, SkipIdempotency, currentTransaction, IdempotencyConnections };
        return benchModule([IdempotencyModule.forRoot(spec.options)], undefined, [insertController(lib)]);
      }
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- a checkout chosen at run time
      const other = require(path.resolve(spec.libDir)) as InsertLib & { IdempotencyModule: typeof IdempotencyModule };
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- the same checkout's internals (not exported)
      const internals = require(path.resolve(spec.libDir, 'storage/idempotency-connections')) as Pick<InsertLib, 'IdempotencyConnections'>;
      return benchModule([other.IdempotencyModule.forRoot(spec.options)], undefined, [insertController({ ...other, ...internals })]);
    }
    case 'bare':
    case 'floor':
      return benchModule([]);
    case 'node-idempotency': {
      const peer = await import('@node-idempotency/nestjs');
      const storage = { adapter: peer.StorageAdapterEnum.redis, options: { url: spec.redisUrl } };
      return benchModule([peer.NodeIdempotencyModule.forRootAsync({ storage, cacheKeyPrefix: spec.keyPrefix })], peer.Idempotent());
    }
  }
}

/**
 * The floor of a Postgres-only replay: the record of the request's key read by one prepared statement on the
 * (scope, key) index, over a pool of the module's default size.
 */
function installFloor(app: INestApplication, spec: Extract<BenchAppSpec, { kind: 'floor' }>): void {
  const pool = new Pool({ connectionString: spec.databaseUrl, max: spec.poolSize, allowExitOnIdle: true });
  const text = `SELECT status, fingerprint, result, expires_at FROM "${spec.schema}".idempotency_records WHERE scope = $1 AND key = $2 AND status = 'completed'`;
  const stats = app.get(HandlerStats);
  const work = app.get(RouteWork);
  work.run = async (key) => {
    const { rowCount } = await pool.query({ name: 'bench_floor', text, values: ['http:', key ?? ''] });
    if (rowCount !== 1) stats.record(key); // the checks count a missing record as a handler run
  };
  work.close = () => pool.end();
}

export interface BenchApp {
  app: INestApplication;
  port: number;
}

/**
 * Counts the module's round trips: queries on its pool by statement name (`idem_claim_<hash>` counts
 * as `claim`) and commands on its Redis client by name.
 */
function countRoundTrips(app: INestApplication): void {
  const stats = app.get(HandlerStats);
  let connections: { pool: Pool; redis?: unknown };
  try {
    const found = app.get(IdempotencyConnections, { strict: false });
    connections = { pool: found.pool, redis: found.redis };
  } catch {
    return; // the module's internals changed: the report shows no counts
  }
  const pool = connections.pool;
  stats.pool = pool;
  const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  (pool as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    const config = args[0] as { name?: string } | string;
    const name = typeof config === 'object' && config.name ? config.name.replace(/^idem_(\w+)_[0-9a-f]{8}$/, '$1') : 'unnamed';
    stats.query(name);
    return query(...args);
  };
  const redis = connections.redis as { sendCommand?: (command: { name: string }, ...rest: unknown[]) => unknown } | undefined;
  if (redis?.sendCommand) {
    const send = redis.sendCommand.bind(redis);
    redis.sendCommand = (command: { name: string }, ...rest: unknown[]) => {
      stats.redisCommand(command.name);
      return send(command, ...rest);
    };
  }
}

/** A real Nest app (no testing module) on the chosen adapter, logger off, listening on 127.0.0.1 on a free port. */
export async function startBenchApp(adapter: AdapterName, spec: BenchAppSpec): Promise<BenchApp> {
  const module = await moduleFor(spec);
  const app = adapter === 'fastify'
    ? await NestFactory.create<NestFastifyApplication>(module, new FastifyAdapter(), { logger: false, abortOnError: false })
    : await NestFactory.create(module, { logger: false, abortOnError: false });
  if (spec.kind === 'floor') installFloor(app, spec);
  await app.listen(0, '127.0.0.1');
  if (spec.kind === 'ours') countRoundTrips(app);
  const address = (app.getHttpServer() as { address(): AddressInfo | string | null }).address();
  if (!address || typeof address === 'string') throw new Error('the bench app is not listening on a TCP port');
  return { app, port: address.port };
}
