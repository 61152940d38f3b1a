import { ConfigService } from '@nestjs/config';
import type { IdempotencyModuleOptions, TransactionIsolation } from '../../lib';
import { idempotencyScope } from '../auth/principal';
import { DEFAULT_PAYMENT_EVENTS_QUEUE, PAYMENT_CREATED } from '../notifications/payment-created';

/** Reads one optional setting; an absent or empty variable leaves the library's default. */
type Reader = (name: string) => string | undefined;

const list = (value: string | undefined) => value?.split(',').map((s) => s.trim()).filter(Boolean);
// Anything not "true"/"false" is passed through so the library's startup check names the bad option.
const bool = (value: string | undefined) => (value === 'true' ? true : value === 'false' ? false : (value as unknown as boolean | undefined));
const int = (value: string | undefined) => (value === undefined ? undefined : Number(value));
const durationOrFalse = (value: string | undefined) => (value === 'false' ? (false as const) : value);

/** `RETENTION_QUEUES="payments=30d,ephemeral=0"` → `{ payments: '30d', ephemeral: '0' }`. */
function queueMap(value: string | undefined): Record<string, string> | undefined {
  if (value === undefined) return undefined;
  return Object.fromEntries(list(value)!.map((pair) => pair.split('=').map((s) => s.trim()) as [string, string]));
}

/** Drops keys whose value is undefined, so defaults apply. */
function compact<T extends object>(object: T): T {
  return Object.fromEntries(Object.entries(object).filter(([, v]) => v !== undefined)) as T;
}

/**
 * Every IdempotencyModule option from environment variables (see the README's configuration reference for
 * the names). Only DATABASE_URL is required; without REDIS_URL the module runs on Postgres alone. The key's
 * scope is not configurable here: it is always the authenticated client (sample-app/auth).
 */
export function idempotencyOptionsFromEnv(config: ConfigService): IdempotencyModuleOptions {
  const env: Reader = (name) => {
    const value = config.get<string>(name);
    return value === undefined || value === '' ? undefined : value;
  };
  const redisUrl = env('REDIS_URL');
  return {
    postgres: compact({
      url: config.getOrThrow<string>('DATABASE_URL'), schema: env('IDEMPOTENCY_SCHEMA'), poolSize: int(env('IDEMPOTENCY_PG_POOL_SIZE')),
      preparedStatements: bool(env('IDEMPOTENCY_PG_PREPARED_STATEMENTS')),
    }),
    redis: redisUrl
      ? compact({
          url: redisUrl,
          keyPrefix: env('IDEMPOTENCY_REDIS_PREFIX'),
          commandTimeout: env('IDEMPOTENCY_REDIS_TIMEOUT'),
          breaker: compact({ failureThreshold: int(env('IDEMPOTENCY_REDIS_BREAKER_THRESHOLD')), resetAfter: env('IDEMPOTENCY_REDIS_BREAKER_RESET') }),
        })
      : false,
    migrationsRun: bool(env('IDEMPOTENCY_MIGRATIONS_RUN')) ?? true,
    http: compact({
      enabled: bool(env('IDEMPOTENCY_HTTP_ENABLED')),
      header: env('IDEMPOTENCY_HEADER'),
      ttl: env('IDEMPOTENCY_TTL'),
      lockTimeout: env('IDEMPOTENCY_LOCK_TIMEOUT'),
      required: bool(env('IDEMPOTENCY_REQUIRED')),
      methods: list(env('IDEMPOTENCY_METHODS')),
      replayHeaders: list(env('IDEMPOTENCY_REPLAY_HEADERS')),
      ignoreBodyFields: list(env('IDEMPOTENCY_IGNORE_BODY_FIELDS')),
      failOpen: bool(env('IDEMPOTENCY_FAIL_OPEN')),
      wait: durationOrFalse(env('IDEMPOTENCY_WAIT')),
      transaction: bool(env('IDEMPOTENCY_TRANSACTION')),
      isolation: env('IDEMPOTENCY_ISOLATION') as TransactionIsolation | undefined,
      // Never from a header the client chooses: see idempotencyScope.
      scope: idempotencyScope,
    }),
    workflows: compact({
      queuePrefix: env('WORKFLOWS_QUEUE_PREFIX'),
      concurrency: int(env('WORKFLOWS_CONCURRENCY')),
      workflowConcurrency: int(env('WORKFLOWS_WORKFLOW_CONCURRENCY')),
      recoveryInterval: env('WORKFLOWS_RECOVERY_INTERVAL'),
      maxRecoveryAttempts: int(env('WORKFLOWS_MAX_RECOVERY_ATTEMPTS')),
      stalledInterval: env('WORKFLOWS_STALLED_INTERVAL'),
      lockDuration: env('WORKFLOWS_LOCK_DURATION'),
      pollInterval: env('WORKFLOWS_POLL_INTERVAL'),
      workers: bool(env('WORKFLOWS_WORKERS')),
    }),
    retention: compact({
      default: env('RETENTION_DEFAULT'),
      workflows: env('RETENTION_WORKFLOWS'),
      tasks: env('RETENTION_TASKS'),
      queues: queueMap(env('RETENTION_QUEUES')),
      inbox: durationOrFalse(env('RETENTION_INBOX')),
      cleanupInterval: durationOrFalse(env('RETENTION_CLEANUP_INTERVAL')),
      batchSize: int(env('RETENTION_BATCH_SIZE')),
    }),
    // Every charge publishes payment.created in its transaction: to BullMQ when there is Redis, else to an @OutboxHandler.
    outbox: compact({
      topics: { [PAYMENT_CREATED]: redisUrl ? { to: 'bullmq' as const, queue: env('OUTBOX_PAYMENTS_QUEUE') ?? DEFAULT_PAYMENT_EVENTS_QUEUE } : { to: 'handler' as const } },
      relay: compact({
        enabled: bool(env('OUTBOX_RELAY_ENABLED')),
        batchSize: int(env('OUTBOX_RELAY_BATCH_SIZE')),
        pollInterval: env('OUTBOX_RELAY_POLL_INTERVAL'),
        concurrency: int(env('OUTBOX_RELAY_CONCURRENCY')),
      }),
      maxAttempts: int(env('OUTBOX_MAX_ATTEMPTS')),
      deliveryTimeout: env('OUTBOX_DELIVERY_TIMEOUT'),
      retention: env('OUTBOX_RETENTION'),
    }),
    // The orders' charge step calls the payment provider on the `stripe` queue (the orders need Redis): at most
    // STRIPE_RATE_LIMIT calls across all instances, STRIPE_CONCURRENCY at once per instance.
    ...(redisUrl ? { queues: { stripe: compact({ rateLimit: env('STRIPE_RATE_LIMIT') ?? '100/s', concurrency: int(env('STRIPE_CONCURRENCY')) }) } } : {}),
  };
}
