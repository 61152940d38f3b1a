import type Redis from 'ioredis';
import type { RedisOptions } from 'ioredis';
import type { DataSource } from 'typeorm';
import type { RetentionOptions } from '../retention/retention.interfaces';
import type { Duration } from '../utils/duration';
import type { OutboxOptions } from '../outbox/outbox.interfaces';

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
  /** Prefix of every Redis key the module writes. Default `"idem"`. */
  keyPrefix?: string;
  /** A Redis call slower than this counts as a failure and is answered from Postgres. Default `"250ms"`. */
  commandTimeout?: Duration;
  breaker?: RedisBreakerOptions;
}

/** Redis: a URL, ioredis options (`{ host, port, … }` or `{ options }`), or the app's own client. `false` runs on Postgres alone. */
export type RedisModuleOptions =
  | false
  | (RedisCommonOptions & { url: string })
  | (RedisCommonOptions & { client: Redis })
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

/** HTTP settings; every field can be overridden per route with `@Idempotent()`. */
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
}

/** Per-route settings given to `@Idempotent()`. */
export type IdempotentRouteOptions = Omit<HttpIdempotencyOptions, 'enabled' | 'global' | 'methods' | 'header' | 'failOpen' | 'problemTypeBase'>;

/** Durable workflows (`@Workflow()` / `@Step()`); they need Redis. */
export interface WorkflowModuleOptions {
  /** BullMQ key prefix of the workflow and step queues; put a `{hash tag}` in it for Redis Cluster. Default `"idem-wf"`. */
  queuePrefix?: string;
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
}
