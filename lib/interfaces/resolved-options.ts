import type { ResolvedRetentionOptions } from '../retention/retention.interfaces';
import type Redis from 'ioredis';
import type { Cluster, ClusterNode, ClusterOptions, RedisOptions } from 'ioredis';
import type { DataSource } from 'typeorm';
import type { TransactionSetting } from '../transaction/transaction-options';
import type { IdempotencyRequest } from './idempotency-options.interface';
import type { ResolvedOutboxOptions } from '../outbox/outbox.interfaces';
import type { ResolvedObservabilityOptions } from '../observability/observability-options';
import type { ResolvedConsoleOptions } from '../console/console-options';
import type { IdempotencyLogLevel } from '../observability/library-logger';
import type { ResolvedQueueOptions } from '../queues/queue-options.interfaces';

/** HTTP settings after defaults and duration parsing (internal). */
export interface ResolvedHttpOptions {
  enabled: boolean;
  global: boolean;
  header: string;
  ttlMs: number;
  leaseMs: number;
  required: boolean;
  methods: Set<string>;
  scope?: (request: IdempotencyRequest) => string | undefined;
  /** No `scope` was configured (not even `"global"`): a startup warning says how to set one. */
  scopeDefaulted: boolean;
  /** Prefix of problem `type` URIs; the problem's code follows it. */
  problemTypeBase: string;
  replayHeaders: string[];
  ignoreBodyFields: string[];
  failOpen: boolean;
  waitMs: number;
  retryableStatuses: Set<number>;
  storeServerErrors: boolean;
  /** The handler runs in a transaction of the library that also stores its response (`transaction: true`). */
  transaction: TransactionSetting;
}

/** Workflow settings after defaults and duration parsing (internal). */
export interface ResolvedWorkflowOptions {
  /** Undefined: derived from the database, schema and `app` (see WorkflowQueues). */
  queuePrefix?: string;
  app?: string;
  concurrency: number;
  workflowConcurrency: number;
  recoveryIntervalMs: number;
  maxRecoveryAttempts: number;
  stalledIntervalMs: number;
  lockDurationMs: number;
  pollIntervalMs: number;
  workers: boolean;
  /** Steps and runs execute in this process with no BullMQ or Redis (IdempotencyTestingModule). */
  inline?: boolean;
}

/** Module options after validation (internal). */
export interface ResolvedOptions {
  postgres:
    | { kind: 'url'; url: string; schema: string; poolSize: number; preparedStatements: boolean }
    | { kind: 'dataSource'; dataSource: string | DataSource; schema?: string; preparedStatements: boolean };
  redis:
    | false
    | {
        connection: { url: string } | { client: Redis | Cluster } | { options: RedisOptions } | { cluster: { nodes: ClusterNode[]; options: ClusterOptions } };
        /** Undefined: derived from the Postgres database and schema, so two stores never share cache entries. */
        keyPrefix?: string;
        commandTimeoutMs: number;
        failureThreshold: number;
        resetAfterMs: number;
      };
  migrationsRun: boolean;
  http: ResolvedHttpOptions;
  workflows: ResolvedWorkflowOptions;
  retention: ResolvedRetentionOptions;
  /** Undefined when the `outbox` option is not set. */
  outbox?: ResolvedOutboxOptions;
  observability: ResolvedObservabilityOptions;
  /** Undefined when the console is off. */
  console?: ResolvedConsoleOptions;
  /** The least severe line the library logs; false: none. */
  logLevel: IdempotencyLogLevel | false;
  /** Per-queue settings (`queues` option) by queue name; `{}` when none. */
  queues: Record<string, ResolvedQueueOptions>;
}
