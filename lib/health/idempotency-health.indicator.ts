import { Inject, Injectable, Optional } from '@nestjs/common';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { IdempotencyConnections } from '../storage/idempotency-connections';
import { pendingMigrations } from '../storage/postgres/schema-migrator';
import { StepWorker } from '../workflow/step-worker';
import { WorkflowRegistry } from '../workflow/workflow.registry';
import { WorkflowWorker } from '../workflow/workflow-worker';

/** What the indicator found; `status` is what `@nestjs/terminus` reads (`down` makes the check fail with 503). */
export interface IdempotencyHealth {
  status: 'up' | 'down';
  /** Postgres answered a query within the timeout. */
  postgres: 'up' | 'down';
  /** Every migration of the library is applied (`behind`: run them; `unknown`: Postgres is down). */
  schema: 'current' | 'behind' | 'unknown';
  /** Redis answered; `bypassed` while it does not (requests are served from Postgres alone); `disabled` with `redis: false`. */
  redis: 'up' | 'bypassed' | 'disabled';
  /** This instance's workflow workers: `none` when it runs none (no workflows, or `workflows.workers: false`). */
  workers: 'alive' | 'stopped' | 'none';
  /** Up, but Redis is bypassed: slower, still correct. */
  degraded: boolean;
  /** Migrations the schema lacks, when `schema` is `behind`. */
  pending?: string[];
  /** Why Postgres is down. */
  error?: string;
}

/** Options of {@link IdempotencyHealthIndicator.isHealthy}. */
export interface IdempotencyHealthOptions {
  /** How long Postgres and Redis may take to answer, in milliseconds. Default 2000. */
  timeoutMs?: number;
}

/**
 * A health indicator for `@nestjs/terminus` (works without it too: it returns terminus's result shape): down when
 * Postgres is unreachable, the schema lacks migrations or this instance's workflow workers stopped; up but `degraded`
 * while Redis is bypassed, since the library then serves every request from Postgres alone.
 *
 * ```ts
 * @Get('health') @HealthCheck()
 * check() { return this.health.check([() => this.idempotency.isHealthy()]); }
 * ```
 */
@Injectable()
export class IdempotencyHealthIndicator {
  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    @Optional() private readonly connections?: IdempotencyConnections,
    @Optional() private readonly registry?: WorkflowRegistry,
    @Optional() private readonly workflowWorker?: WorkflowWorker,
    @Optional() private readonly stepWorker?: StepWorker,
  ) {}

  /** Checks Postgres, the schema, Redis and the workers; the result is keyed by `key` as terminus expects. */
  async isHealthy(key = 'idempotency', { timeoutMs = 2000 }: IdempotencyHealthOptions = {}): Promise<Record<string, IdempotencyHealth>> {
    const [postgres, redis] = await Promise.all([this.postgres(timeoutMs), this.redis(timeoutMs)]);
    const workers = this.workers();
    const up = postgres.postgres === 'up' && postgres.schema === 'current' && workers !== 'stopped';
    return { [key]: { status: up ? 'up' : 'down', ...postgres, redis, workers, degraded: up && redis === 'bypassed' } };
  }

  private async postgres(timeoutMs: number): Promise<Pick<IdempotencyHealth, 'postgres' | 'schema' | 'pending' | 'error'>> {
    const connections = this.connections;
    if (!connections) return { postgres: 'up', schema: 'current' }; // IdempotencyTestingModule: no database to reach
    try {
      const pending = await within(timeoutMs, 'Postgres', () => pendingMigrations(connections.dataSource, connections.schema));
      return pending.length === 0 ? { postgres: 'up', schema: 'current' } : { postgres: 'up', schema: 'behind', pending };
    } catch (err) {
      return { postgres: 'down', schema: 'unknown', error: err instanceof Error ? err.message : String(err) };
    }
  }

  private async redis(timeoutMs: number): Promise<IdempotencyHealth['redis']> {
    const redis = this.options.redis ? this.connections?.redis : undefined;
    if (!redis) return 'disabled';
    try {
      await within(timeoutMs, 'Redis', () => redis.ping());
      return 'up';
    } catch {
      return 'bypassed';
    }
  }

  private workers(): IdempotencyHealth['workers'] {
    if (!this.options.workflows.workers || this.options.workflows.inline || !this.registry || this.registry.all().length === 0) return 'none';
    const alive = (this.workflowWorker?.workersAlive() ?? true) && (this.stepWorker?.workersAlive() ?? true);
    return alive ? 'alive' : 'stopped';
  }
}

function within<T>(ms: number, what: string, call: () => Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    call(),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
