import type { ObservabilityOptions } from '../observability/observability-options';
import type { IdempotencyLogLevel } from '../observability/library-logger';
import type { HttpIdempotencyOptions, WorkflowModuleOptions } from '../interfaces/idempotency-options.interface';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import type { RetentionOptions } from '../retention/retention.interfaces';
import { IdempotencyConfigError } from '../errors/idempotency-config.error';
import { resolveOptions } from '../utils/validate-options';
import type { QueueOptions } from '../queues/queue-options.interfaces';

/** Options of `IdempotencyTestingModule.forRoot()`: the module's own, minus everything about Postgres and Redis. */
export interface IdempotencyTestingOptions {
  /** HTTP settings, as in `IdempotencyModule` (the interceptor is registered globally unless `enabled: false`). */
  http?: HttpIdempotencyOptions;
  /**
   * Workflow settings that mean something in process: `pollInterval` (default `"100ms"` here), `maxRecoveryAttempts`,
   * and `lockDuration`, how long closing the app waits for steps in progress (default `"5s"` here).
   */
  workflows?: Pick<WorkflowModuleOptions, 'maxRecoveryAttempts' | 'pollInterval' | 'lockDuration'>;
  /** Retention, applied when a test calls `RetentionService.cleanup()` (nothing runs in the background). */
  retention?: Omit<RetentionOptions, 'cleanupInterval' | 'batchSize'>;
  /** Metrics and spans, as in `IdempotencyModule` (the engine's decisions are recorded; the in-memory stores are not timed). */
  observability?: ObservabilityOptions;
  /** The least severe line the library logs, as in `IdempotencyModule`. */
  logLevel?: IdempotencyLogLevel | false;
  /**
   * Per-queue settings, validated as in `IdempotencyModule` so one options object serves both; only `retention` acts
   * here (steps run in process, one at a time per call: there is no queue to rate-limit, share out or prioritize).
   */
  queues?: Record<string, QueueOptions>;
}


const KNOWN_KEYS = ['http', 'workflows', 'retention', 'observability', 'logLevel', 'queues'];
/** Settings of the module that mean nothing in process: given here, they would be silently ignored. */
const NOT_IN_PROCESS: Record<'workflows' | 'retention', { keeps: readonly string[]; drops: readonly string[] }> = {
  workflows: {
    keeps: ['maxRecoveryAttempts', 'pollInterval', 'lockDuration'],
    drops: ['queuePrefix', 'concurrency', 'workflowConcurrency', 'recoveryInterval', 'stalledInterval', 'workers'],
  },
  retention: { keeps: [], drops: ['cleanupInterval', 'batchSize'] },
};

/** A placeholder the validation needs; nothing ever connects to it. */
const NO_POSTGRES = 'postgres://in-memory/idempotency-testing';

/** Validates the testing options with the module's own rules (one IdempotencyConfigError naming every bad option). */
export function resolveTestingOptions(options: IdempotencyTestingOptions = {}): ResolvedOptions {
  const unknown = Object.keys(options).filter((key) => !KNOWN_KEYS.includes(key));
  if (unknown.length > 0) {
    throw new IdempotencyConfigError(unknown.map((key) => (
      `${key}: not an option of IdempotencyTestingModule.forRoot(), which takes ${KNOWN_KEYS.join(', ')} (it has no Postgres or Redis to configure)`
    )));
  }
  const ignored: string[] = [];
  for (const [section, { keeps, drops }] of Object.entries(NOT_IN_PROCESS)) {
    const given = options[section as keyof typeof NOT_IN_PROCESS];
    if (typeof given !== 'object' || given === null) continue;
    for (const key of Object.keys(given).filter((k) => drops.includes(k))) {
      ignored.push(`${section}.${key}: means nothing in IdempotencyTestingModule (no BullMQ, no background cleanup)` +
        (keeps.length > 0 ? `; its ${section} options are ${keeps.join(', ')}` : '; call RetentionService.cleanup() in the test instead'));
    }
  }
  if (ignored.length > 0) throw new IdempotencyConfigError(ignored);
  const resolved = resolveOptions({
    postgres: { url: NO_POSTGRES },
    redis: false,
    http: options.http,
    workflows: { pollInterval: '100ms', lockDuration: '5s', ...options.workflows },
    retention: { ...options.retention, cleanupInterval: false },
    observability: options.observability,
    logLevel: options.logLevel,
    queues: options.queues,
  });
  if (resolved.http.transaction) {
    throw new IdempotencyConfigError([
      'http.transaction: the transactional mode needs Postgres (the handler\'s writes commit with its response); IdempotencyTestingModule has none. ' +
        'Leave it out here and test transactional routes against Postgres with IdempotencyModule',
    ]);
  }
  return { ...resolved, workflows: { ...resolved.workflows, inline: true } };
}
