import type Redis from 'ioredis';
import type { Cluster, ClusterNode, ClusterOptions, RedisOptions } from 'ioredis';
import type { DataSource } from 'typeorm';
import type { RetentionOptions } from '../retention/retention.interfaces';
import type { QueueOptions } from '../queues/queue-options.interfaces';
import type { TransactionIsolation } from '../transaction/transaction-options';
import type { Duration } from '../utils/duration';
import type { OutboxOptions } from '../outbox/outbox.interfaces';
import type { ObservabilityOptions } from '../observability/observability-options';
import type { ConsoleOptions } from '../console/console-options';
import type { IdempotencyLogLevel } from '../observability/library-logger';

/** Settings shared by both forms of the `postgres` option. */
export interface PostgresCommonOptions {
  schema?: string;
  /**
   * Named (server-side) prepared statements for the hot-path queries. Default true. Set false behind PgBouncer in
   * transaction pooling without `max_prepared_statements` (PgBouncer < 1.21), where a statement prepared on one
   * server connection is missing on the next.
   */
  preparedStatements?: boolean;
}

/** Postgres: a connection the module owns, or the app's own `@nestjs/typeorm` DataSource (by name or instance). */
export type PostgresOptions =
  | (PostgresCommonOptions & { url: string; poolSize?: number })
  | (PostgresCommonOptions & { dataSource: string | DataSource });

/** Circuit breaker in front of Redis. */
export interface RedisBreakerOptions {
  /** Consecutive failed Redis calls that trip the breaker. Default 3. */
  failureThreshold?: number;
  /** How long Redis is skipped once tripped, before one probe. Default `"5s"`. */
  resetAfter?: Duration;
}

/** Settings shared by every form of the `redis` option. */
export interface RedisCommonOptions {
  /**
   * Prefix of every Redis key the module writes. Default: derived from the Postgres server, database and schema, so
   * two stores sharing one Redis stay apart.
   */
  keyPrefix?: string;
  /** A Redis call slower than this counts as a failure and is answered from Postgres. Default `"250ms"`. */
  commandTimeout?: Duration;
  breaker?: RedisBreakerOptions;
}

/** A Redis Cluster: its startup nodes, and ioredis Cluster options (`redisOptions` for every node's connection). */
export interface RedisClusterOptions {
  nodes: ClusterNode[];
  options?: ClusterOptions;
}

/**
 * Redis: a URL, ioredis options (`{ host, port, … }` or `{ options }`), a Cluster (`{ cluster: { nodes } }`), or the
 * app's own client (an ioredis `Redis` or `Cluster`). `false` runs on Postgres alone.
 */
export type RedisModuleOptions =
  | false
  | (RedisCommonOptions & { url: string })
  | (RedisCommonOptions & { client: Redis | Cluster })
  | (RedisCommonOptions & { cluster: RedisClusterOptions })
  | (RedisCommonOptions & { options: RedisOptions })
  | (RedisCommonOptions & Omit<RedisOptions, keyof RedisCommonOptions>);

/** The request, as the interceptor sees it (Express or Fastify). */
export interface IdempotencyRequest {
  method: string;
  url: string;
  originalUrl?: string;
  headers: Record<string, string | string[] | undefined>;
  body?: unknown;
  [extra: string]: unknown;
}

/** HTTP settings; those in {@link IdempotentRouteOptions} can be overridden per route with `@Idempotent()`. */
export interface HttpIdempotencyOptions {
  /** Turn the interceptor off: it lets every request through. Default true. */
  enabled?: boolean;
  /**
   * Register `IdempotencyInterceptor` for every route (an `APP_INTERCEPTOR`). false leaves it to the app:
   * `@UseInterceptors(IdempotencyInterceptor)` on controllers or routes, or its own `APP_INTERCEPTOR`. Default true.
   */
  global?: boolean;
  /** Request header carrying the key. Default `"Idempotency-Key"`. */
  header?: string;
  /** How long a completed key is remembered. Default `"24h"`. */
  ttl?: Duration;
  /** The claim's lease: a holder that stops renewing it for this long is presumed dead. Default `"30s"`. */
  lockTimeout?: Duration;
  /** Refuse requests without a key (400). Default false. */
  required?: boolean;
  /** Methods the interceptor acts on without `@Idempotent()`. Default `["POST", "PATCH"]`. */
  methods?: string[];
  /**
   * The key's scope (tenant, user, API key), from the authenticated request; keys in different scopes never
   * meet. `"global"`: one scope for all clients, chosen on purpose. Default: global, with a startup warning.
   */
  scope?: 'global' | ((request: IdempotencyRequest) => string | undefined);
  /** Response headers stored and replayed besides Content-Type, Location and ETag. */
  replayHeaders?: string[];
  /** Body fields left out of the fingerprint (dotted paths, e.g. `"meta.sentAt"`). */
  ignoreBodyFields?: string[];
  /**
   * Run the handler unprotected when the store is down (an outage, nothing else), instead of answering 503;
   * such a response carries `Idempotency-Unprotected: true` and a warning is logged. Default false.
   */
  failOpen?: boolean;
  /** Prefix of the problem `type` URIs; the problem's code follows it. Default: the README's "Problem types" section. */
  problemTypeBase?: string;
  /** Hold a duplicate until the first request finishes, at most this long, then replay; false answers 409 at once. Default false. */
  wait?: false | Duration;
  /** Statuses that release the key so a retry runs again instead of replaying. Default `[408, 409, 425, 429]` (5xx always do, see `storeServerErrors`). */
  retryableStatuses?: number[];
  /** Store and replay 5xx `HttpException` responses too, instead of releasing the key. Default false. */
  storeServerErrors?: boolean;
  /**
   * Run the handler in a Postgres transaction of the library (`currentTransaction()`), kept open until its response
   * is stored in that same transaction: the handler's writes commit if and only if the response is stored. Its
   * tables must live in the module's Postgres database. Each request in flight holds one pooled connection. Default false.
   */
  transaction?: boolean;
  /** Isolation level of that transaction. Default `"read committed"`. */
  isolation?: TransactionIsolation;
}

/** Per-route settings given to `@Idempotent()`. */
export type IdempotentRouteOptions = Omit<HttpIdempotencyOptions, 'enabled' | 'global' | 'methods' | 'header' | 'failOpen' | 'problemTypeBase'>;

/** Durable workflows (`@Workflow()` / `@Step()`); they need Redis. */
export interface WorkflowModuleOptions {
  /**
   * BullMQ key prefix of the workflow and step queues. Default: `idem-wf-<hash>` of the Postgres database name, the
   * schema and `app`, so applications sharing one Redis never take each other's jobs. On a Redis Cluster each queue
   * gets its own hash tag (`{<prefix>:<queue>}`) unless the prefix carries one.
   */
  queuePrefix?: string;
  /** This application's name, part of the default `queuePrefix`. Default: `name` of the package.json in the working directory. */
  app?: string;
  /** Step jobs each instance runs at once, per step queue. Default 10. */
  concurrency?: number;
  /** Workflow functions each instance drives at once (they mostly wait for steps). Default 100. */
  workflowConcurrency?: number;
  /** How often the reconciler looks for unfinished executions without a live job. Default `"30s"`. */
  recoveryInterval?: Duration;
  /** Recoveries (interrupted runs, re-enqueues) after which an execution ends as failed. Default 10. */
  maxRecoveryAttempts?: number;
  /** BullMQ stalled-job check interval of the workers. Default `"30s"`. */
  stalledInterval?: Duration;
  /** BullMQ job lock duration: a crashed worker's jobs are taken over after this. Default `"30s"`. */
  lockDuration?: Duration;
  /** How often a waiting workflow checks Postgres and the step job, besides job events. Default `"1s"`. */
  pollInterval?: Duration;
  /** Run workers and the reconciler in this instance; false makes a client-only instance. Default true. */
  workers?: boolean;
}

/** Options of `IdempotencyModule.forRoot()` / `forRootAsync()`. */
export interface IdempotencyModuleOptions {
  postgres: PostgresOptions;
  redis: RedisModuleOptions;
  /** Apply the library's migrations at bootstrap; otherwise the schema is verified and bootstrap fails if it is missing. Default false. */
  migrationsRun?: boolean;
  http?: HttpIdempotencyOptions;
  workflows?: WorkflowModuleOptions;
  retention?: RetentionOptions;
  /** The transactional outbox: topics and where they go, the relay, retries and retention of delivered messages. */
  outbox?: OutboxOptions;
  /** Metrics and traces through `@opentelemetry/api` (on when it is installed). See README "Operating it". */
  observability?: ObservabilityOptions;
  /** A web console for workflows and keys, behind your guard (off by default). See README "Console". */
  console?: ConsoleOptions;
  /**
   * The least severe line the library itself logs (contexts `Idempotency` and `Workflows`, through Nest's `Logger`);
   * `false` silences it. The app's own lines are not affected. Default `'log'` (no debug or verbose lines).
   */
  logLevel?: IdempotencyLogLevel | false;
  /**
   * Per-queue settings of workflow and step queues by queue name: `retention`, a `rateLimit` held across all
   * instances, per-instance `concurrency`, job `priority`. A name no workflow or step uses fails at bootstrap.
   * See README "Queues".
   */
  queues?: Record<string, QueueOptions>;
}
