import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { LibraryLogger } from '../observability/library-logger';
import { ModuleRef } from '@nestjs/core';
import { createHash } from 'node:crypto';
import type { Cluster, default as Redis } from 'ioredis';
import type { Pool } from 'pg';
import type { DataSource } from 'typeorm';
import { IdempotencyConfigError } from '../errors/idempotency-config.error';
import { IdempotencySchemaError } from '../errors/idempotency-schema.error';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { loadPeer } from '../utils/optional-peer';
import { pendingMigrations, runMigrations, withMigrationConnection } from './postgres/schema-migrator';

/**
 * Owns (or borrows) the Postgres pool and the Redis client, prepares the schema at bootstrap,
 * and closes what it owns on shutdown. Borrowed connections are left to their owner.
 */
@Injectable()
export class IdempotencyConnections implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger: Logger = new LibraryLogger('Idempotency');
  private opened?: { dataSource: DataSource; pool: Pool; schema: string; redis?: Redis | Cluster; redisKeyPrefix: string };
  private ownedDataSource?: DataSource;
  private ownedRedis?: Redis | Cluster;

  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly moduleRef: ModuleRef,
  ) {}

  /** The TypeORM DataSource: the app's own when reused, else one the module owns (for transactions such as the inbox's). */
  get dataSource(): DataSource {
    return this.state().dataSource;
  }

  /** The Postgres pool the store queries (the DataSource's own pool). */
  get pool(): Pool {
    return this.state().pool;
  }

  /** The schema of the library's tables. */
  get schema(): string {
    return this.state().schema;
  }

  /** Whether the stores send named (server-side prepared) statements: `postgres.preparedStatements`. */
  get preparedStatements(): boolean {
    return this.options.postgres.preparedStatements;
  }

  /** Prefix of the cache's Redis keys: the configured one, or one derived from the Postgres database and schema. */
  get redisKeyPrefix(): string {
    return this.state().redisKeyPrefix;
  }

  /** The Redis client (a standalone server or a Cluster), when Redis is enabled. */
  get redis(): Redis | Cluster | undefined {
    return this.state().redis;
  }

  /**
   * Opens the connections; called by IdempotencyModule's own onModuleInit, which Nest runs once every provider of
   * the module has finished its own (not in a factory: by then every provider exists, including the app's TypeORM
   * DataSource when it is reused by name, whatever the order of module imports). A provider that refuses the
   * startup (an invalid workflow, say) fails app.init() before any connection opens, so none is left behind: Nest
   * runs no shutdown hook after a failed init. One refused here closes what it had opened.
   */
  async open(): Promise<void> {
    const { dataSource, schema, owned } = await IdempotencyConnections.postgres(this.options, this.moduleRef);
    try {
      this.opened = await this.completeOpening(dataSource, schema);
    } catch (err) {
      // A startup refused here (the schema not migrated, say) fails app.init(), after which Nest runs no shutdown
      // hook: what was opened for it closes now.
      this.ownedRedis?.disconnect();
      this.ownedRedis = undefined;
      if (owned) await dataSource.destroy().catch(() => undefined);
      throw err;
    }
    if (owned) this.ownedDataSource = dataSource;
  }

  /** The schema prepared (or checked), the Redis client created (it connects at bootstrap), the cache's key prefix. */
  private async completeOpening(dataSource: DataSource, schema: string): Promise<NonNullable<IdempotencyConnections['opened']>> {
    const options = this.options;
    await IdempotencyConnections.prepareSchema(dataSource.options, schema, options.migrationsRun);
    const pool = (dataSource.driver as unknown as { master: Pool }).master;
    let redis: Redis | Cluster | undefined;
    if (options.redis) {
      const c = options.redis.connection;
      if ('client' in c) {
        redis = c.client;
      } else {
        // Auto-pipelining sends the commands of all requests handled in one event-loop turn in one socket write: under
        // load the per-command write syscall was the largest single cost of a Redis replay (bench:http profile).
        const common = {
          enableOfflineQueue: false, maxRetriesPerRequest: 1, lazyConnect: true, enableAutoPipelining: true,
          retryStrategy: (n: number) => Math.min(n * 200, 2000),
        };
        const { default: RedisClient, Cluster: ClusterClient } = loadPeer('ioredis', 'redis');
        if ('cluster' in c) {
          const { nodes, options: clusterOptions } = c.cluster;
          redis = new ClusterClient(nodes, {
            ...clusterOptions,
            enableOfflineQueue: false,
            lazyConnect: true,
            clusterRetryStrategy: common.retryStrategy,
            redisOptions: { ...clusterOptions.redisOptions, maxRetriesPerRequest: 1 },
          });
        } else {
          redis = 'url' in c ? new RedisClient(c.url, common) : new RedisClient({ ...c.options, ...common });
        }
        redis.on('error', () => undefined); // failures are reported by the circuit breaker
        this.ownedRedis = redis;
      }
    }
    const redisKeyPrefix = (options.redis && options.redis.keyPrefix) || (await IdempotencyConnections.derivedKeyPrefix(pool, schema));
    return { dataSource, pool, schema, redis, redisKeyPrefix };
  }

  // Connecting waits for bootstrap: should another module's init fail, no socket is left open behind it.
  async onApplicationBootstrap(): Promise<void> {
    await this.ownedRedis?.connect().catch((err: Error) => {
      this.logger.warn(`Redis is not reachable at startup (${err.message}); serving from Postgres alone until it is`);
    });
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.ownedRedis) this.ownedRedis.disconnect();
    if (this.ownedDataSource?.isInitialized) await this.ownedDataSource.destroy();
  }

  private state(): { dataSource: DataSource; pool: Pool; schema: string; redis?: Redis | Cluster; redisKeyPrefix: string } {
    if (!this.opened) throw new Error('nestjs-idempotency is not initialized yet: call app.init() (or listen()) before using it');
    return this.opened;
  }

  /**
   * The default `redis.keyPrefix`: a Redis cache entry must never answer for another database or schema than the one
   * that holds its record. The server is named by its cluster's system identifier, the same however it is reached
   * (TCP, a Unix socket, PgBouncer) and on a promoted replica; where that is not readable, by its address as seen
   * from this connection.
   */
  static async derivedKeyPrefix(pool: Pool, schema: string): Promise<string> {
    let identity: string;
    try {
      const { rows } = await pool.query<{ identity: string }>(
        "SELECT concat_ws('/', (SELECT system_identifier FROM pg_control_system())::text, current_database()) AS identity",
      );
      identity = `cluster/${rows[0].identity}`;
    } catch {
      const { rows } = await pool.query<{ identity: string }>(
        "SELECT concat_ws('/', inet_server_addr()::text, inet_server_port()::text, current_database()) AS identity",
      );
      identity = rows[0].identity;
    }
    return `idem:${createHash('sha1').update(`${identity}/${schema}`).digest('hex').slice(0, 12)}`;
  }

  private static async postgres(options: ResolvedOptions, moduleRef: ModuleRef): Promise<{ dataSource: DataSource; schema: string; owned: boolean }> {
    const pg = options.postgres;
    if (pg.kind === 'url') {
      // allowExitOnIdle: idle pooled connections never keep a process alive on their own (a failed bootstrap,
      // a script that is done); a server stays up through its HTTP listener and workers.
      const { DataSource } = loadPeer('typeorm', 'postgres');
      const dataSource = new DataSource({
        type: 'postgres', url: pg.url, schema: pg.schema, poolSize: pg.poolSize, entities: [], logging: false, extra: { allowExitOnIdle: true },
      });
      await dataSource.initialize();
      // an idle client that lost its connection is dropped by pg; the next query reconnects
      (dataSource.driver as unknown as { master: Pool }).master.on('error', () => undefined);
      return { dataSource, schema: pg.schema, owned: true };
    }
    const dataSource = typeof pg.dataSource === 'string' ? IdempotencyConnections.findDataSource(pg.dataSource, moduleRef) : pg.dataSource;
    if (!dataSource.isInitialized) await dataSource.initialize();
    if (dataSource.options.type !== 'postgres') {
      throw new IdempotencyConfigError([`postgres.dataSource: the DataSource is of type "${dataSource.options.type}"; nestjs-idempotency needs Postgres`]);
    }
    const schema = pg.schema ?? (dataSource.options as { schema?: string }).schema ?? 'public';
    return { dataSource, schema, owned: false };
  }

  private static findDataSource(name: string, moduleRef: ModuleRef): DataSource {
    // Resolved lazily so the app's TypeOrmModule needs no import order relative to this module.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { getDataSourceToken } = require('@nestjs/typeorm') as typeof import('@nestjs/typeorm');
    try {
      return moduleRef.get<DataSource>(getDataSourceToken(name), { strict: false });
    } catch {
      throw new IdempotencyConfigError([
        `postgres.dataSource: no TypeORM DataSource named "${name}" is registered; import TypeOrmModule.forRoot({ name: "${name}", … }) or pass { url }`,
      ]);
    }
  }

  /** Applies the library's migrations, or checks they were applied, on a short-lived connection of its own. */
  private static async prepareSchema(connection: object, schema: string, run: boolean): Promise<void> {
    await withMigrationConnection(connection, schema, async (dataSource) => {
      if (run) {
        await runMigrations(dataSource, schema);
        return;
      }
      const missing = await pendingMigrations(dataSource, schema);
      if (missing.length > 0) throw new IdempotencySchemaError(schema, missing);
    });
  }
}
