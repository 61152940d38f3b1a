import type { HttpIdempotencyOptions, WorkflowModuleOptions } from '../interfaces/idempotency-options.interface';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import type { RetentionOptions } from '../retention/retention.interfaces';
import { IdempotencyConfigError } from '../errors/idempotency-config.error';
import { resolveOptions } from '../utils/validate-options';

/** Options of `IdempotencyTestingModule.forRoot()`: the module's own, minus everything about Postgres and Redis. */
export interface IdempotencyTestingOptions {
  /** HTTP settings, as in `IdempotencyModule` (the interceptor is registered globally unless `enabled: false`). */
  http?: HttpIdempotencyOptions;
  /** Workflow settings that mean something in process. `pollInterval` defaults to `"100ms"` here. */
  workflows?: Pick<WorkflowModuleOptions, 'maxRecoveryAttempts' | 'pollInterval' | 'lockDuration'>;
  /** Retention, applied when a test calls `RetentionService.cleanup()` (nothing runs in the background). */
  retention?: Omit<RetentionOptions, 'cleanupInterval' | 'batchSize'>;
}

const KNOWN_KEYS = ['http', 'workflows', 'retention'];

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
  const resolved = resolveOptions({
    postgres: { url: NO_POSTGRES },
    redis: false,
    http: options.http,
    workflows: { pollInterval: '100ms', ...options.workflows },
    retention: { ...options.retention, cleanupInterval: false },
  });
  if (resolved.http.transaction) {
    throw new IdempotencyConfigError([
      'http.transaction: the transactional mode needs Postgres (the handler\'s writes commit with its response); IdempotencyTestingModule has none. ' +
        'Leave it out here and test transactional routes against Postgres with IdempotencyModule',
    ]);
  }
  return { ...resolved, workflows: { ...resolved.workflows, inline: true } };
}
