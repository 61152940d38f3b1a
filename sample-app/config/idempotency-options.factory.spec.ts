import { UnauthorizedException } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { IdempotencyConfigError } from '../../lib';
import { resolveOptions } from '../../lib/utils/validate-options';
import { idempotencyScope } from '../auth/principal';
import { idempotencyOptionsFromEnv } from './idempotency-options.factory';

const config = (env: Record<string, string>) => new ConfigService(env);

describe('idempotencyOptionsFromEnv', () => {
  // ConfigService also reads process.env, which holds the test suite's own DATABASE_URL and REDIS_URL.
  const saved = { ...process.env };
  beforeEach(() => {
    for (const name of Object.keys(process.env)) {
      if (/^(DATABASE_URL|REDIS_URL|IDEMPOTENCY_|RETENTION_|OUTBOX_)/.test(name)) delete process.env[name];
    }
  });
  afterAll(() => {
    process.env = saved;
  });

  it('needs only DATABASE_URL: Postgres alone, migrations on, library defaults elsewhere', () => {
    const options = idempotencyOptionsFromEnv(config({ DATABASE_URL: 'postgres://u@h/db' }));
    expect(options).toEqual({ postgres: { url: 'postgres://u@h/db' }, redis: false, migrationsRun: true, http: { scope: idempotencyScope }, workflows: {}, retention: {},
      outbox: { topics: { 'payment.created': { to: 'handler' } }, relay: {} },
    });
    const resolved = resolveOptions(options);
    expect(resolved.http.ttlMs).toBe(86_400_000);
    expect(resolved.retention.inboxMs).toBeNull();
  });

  it('maps every variable to its option', () => {
    const options = idempotencyOptionsFromEnv(config({
      DATABASE_URL: 'postgres://u@h/db', IDEMPOTENCY_SCHEMA: 'idem', IDEMPOTENCY_PG_POOL_SIZE: '20', IDEMPOTENCY_PG_PREPARED_STATEMENTS: 'false',
      REDIS_URL: 'redis://h:6379', IDEMPOTENCY_REDIS_PREFIX: 'app', IDEMPOTENCY_REDIS_TIMEOUT: '100ms',
      IDEMPOTENCY_REDIS_BREAKER_THRESHOLD: '5', IDEMPOTENCY_REDIS_BREAKER_RESET: '10s', IDEMPOTENCY_MIGRATIONS_RUN: 'false',
      IDEMPOTENCY_HTTP_ENABLED: 'true', IDEMPOTENCY_HEADER: 'X-Request-Key', IDEMPOTENCY_TTL: '12h', IDEMPOTENCY_LOCK_TIMEOUT: '10s',
      IDEMPOTENCY_REQUIRED: 'true', IDEMPOTENCY_METHODS: 'POST, PUT', IDEMPOTENCY_REPLAY_HEADERS: 'X-Trace', IDEMPOTENCY_IGNORE_BODY_FIELDS: 'meta.sentAt,nonce',
      IDEMPOTENCY_FAIL_OPEN: 'false', IDEMPOTENCY_WAIT: '5s', IDEMPOTENCY_TRANSACTION: 'true', IDEMPOTENCY_ISOLATION: 'serializable',
      RETENTION_DEFAULT: '3d', RETENTION_WORKFLOWS: '14d', RETENTION_TASKS: '5d', RETENTION_QUEUES: 'payments=30d, ephemeral=0', RETENTION_INBOX: '90d',
      RETENTION_CLEANUP_INTERVAL: '15m', RETENTION_BATCH_SIZE: '500',
      WORKFLOWS_QUEUE_PREFIX: '{orders}', WORKFLOWS_CONCURRENCY: '4', WORKFLOWS_WORKFLOW_CONCURRENCY: '40', WORKFLOWS_RECOVERY_INTERVAL: '10s',
      WORKFLOWS_MAX_RECOVERY_ATTEMPTS: '3', WORKFLOWS_STALLED_INTERVAL: '5s', WORKFLOWS_LOCK_DURATION: '20s', WORKFLOWS_POLL_INTERVAL: '2s',
      WORKFLOWS_WORKERS: 'false',
      OUTBOX_PAYMENTS_QUEUE: 'payments-out', OUTBOX_RELAY_ENABLED: 'false', OUTBOX_RELAY_BATCH_SIZE: '50', OUTBOX_RELAY_POLL_INTERVAL: '250ms',
      OUTBOX_RELAY_CONCURRENCY: '3', OUTBOX_MAX_ATTEMPTS: '4', OUTBOX_DELIVERY_TIMEOUT: '5s', OUTBOX_RETENTION: '2d',
    }));
    const r = resolveOptions(options);
    expect(r.postgres).toEqual({ kind: 'url', url: 'postgres://u@h/db', schema: 'idem', poolSize: 20, preparedStatements: false });
    expect(r.redis).toMatchObject({ connection: { url: 'redis://h:6379' }, keyPrefix: 'app', commandTimeoutMs: 100, failureThreshold: 5, resetAfterMs: 10_000 });
    expect(r.migrationsRun).toBe(false);
    expect(r.http).toMatchObject({
      enabled: true, header: 'x-request-key', ttlMs: 43_200_000, leaseMs: 10_000, required: true, methods: new Set(['POST', 'PUT']),
      replayHeaders: ['X-Trace'], ignoreBodyFields: ['meta.sentAt', 'nonce'], failOpen: false, waitMs: 5000,
      transaction: { isolation: 'serializable' },
    });
    expect(r.workflows).toEqual({
      queuePrefix: '{orders}', concurrency: 4, workflowConcurrency: 40, recoveryIntervalMs: 10_000, maxRecoveryAttempts: 3,
      stalledIntervalMs: 5000, lockDurationMs: 20_000, pollIntervalMs: 2000, workers: false,
    });
    expect(r.retention).toEqual({
      releasedMs: 3 * 86_400_000, workflowsMs: 14 * 86_400_000, tasksMs: 5 * 86_400_000, queuesMs: { payments: 30 * 86_400_000, ephemeral: 0 },
      inboxMs: 90 * 86_400_000, intervalMs: 900_000, batchSize: 500,
    });
    expect(r.outbox).toMatchObject({
      topics: new Map([['payment.created', { to: 'bullmq', queue: 'payments-out', prefix: undefined }]]),
      relay: { enabled: false, batchSize: 50, pollIntervalMs: 250, concurrency: 3 },
      maxAttempts: 4, deliveryTimeoutMs: 5000, retentionMs: 2 * 86_400_000,
    });
  });

  it('scopes keys by the authenticated client, never by a header the client chooses', () => {
    const { scope } = resolveOptions(idempotencyOptionsFromEnv(config({ DATABASE_URL: 'postgres://u@h/db' }))).http;
    expect(scope?.({ method: 'POST', url: '/', headers: {}, user: { clientId: 'c-1' } })).toBe('client:c-1');
    expect(() => scope?.({ method: 'POST', url: '/', headers: { 'x-tenant': 't-1', 'x-client-id': 'c-1' } })).toThrow(UnauthorizedException);
  });

  it('lets the library name a bad variable value at startup', () => {
    const options = idempotencyOptionsFromEnv(config({ DATABASE_URL: 'postgres://u@h/db', IDEMPOTENCY_TTL: 'tomorrow', IDEMPOTENCY_REQUIRED: 'yes' }));
    expect(() => resolveOptions(options)).toThrow(IdempotencyConfigError);
    expect(() => resolveOptions(options)).toThrow(/http\.ttl[\s\S]*http\.required/);
  });

  it('fails without DATABASE_URL', () => {
    expect(() => idempotencyOptionsFromEnv(config({}))).toThrow(/DATABASE_URL/);
  });
});
