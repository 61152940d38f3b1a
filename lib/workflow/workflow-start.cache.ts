import { Inject, Injectable } from '@nestjs/common';
import { LibraryLogger } from '../observability/library-logger';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { IdempotencyConnections } from '../storage/idempotency-connections';
import { CircuitBreaker } from '../storage/redis/circuit-breaker';
import type { WorkflowExecution } from './workflow.interfaces';

interface CachedStart {
  inputHash: string;
  execution: WorkflowExecution;
}

const DATE_FIELDS = ['createdAt', 'updatedAt', 'completedAt', 'deadlineAt'] as const;

/**
 * Redis in front of Postgres for starts: a completed execution is final for its workflow id until retention
 * removes it, so a repeated start of it is answered from Redis. Only completed executions are cached (a live
 * one may still fail and free its id); a miss, an outage or anything else goes to Postgres, which decides.
 */
@Injectable()
export class WorkflowStartCache {
  private readonly breaker?: CircuitBreaker;

  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) options: ResolvedOptions,
    private readonly connections: IdempotencyConnections,
  ) {
    if (options.redis) {
      this.breaker = new CircuitBreaker('Redis', {
        failureThreshold: options.redis.failureThreshold,
        resetAfterMs: options.redis.resetAfterMs,
        timeoutMs: options.redis.commandTimeoutMs,
      }, new LibraryLogger('Workflows'));
    }
  }

  /** The completed execution holding `workflowId`, when Redis has it. */
  async completed(workflowId: string): Promise<CachedStart | undefined> {
    const redis = this.connections.redis;
    if (!this.breaker || !redis) return undefined;
    const raw = await this.breaker.run(() => redis.get(this.key(workflowId)), null);
    if (!raw) return undefined;
    const cached = JSON.parse(raw) as CachedStart;
    for (const field of DATE_FIELDS) {
      const value = cached.execution[field] as unknown;
      (cached.execution as unknown as Record<string, unknown>)[field] = typeof value === 'string' ? new Date(value) : null;
    }
    return cached;
  }

  /** Caches a completed execution until its retention ends. */
  async remember(execution: WorkflowExecution, inputHash: string, retentionMs: number): Promise<void> {
    const redis = this.connections.redis;
    if (!this.breaker || !redis || execution.status !== 'completed' || !execution.completedAt) return;
    const ttl = execution.completedAt.getTime() + retentionMs - Date.now();
    if (ttl <= 0) return;
    const value: CachedStart = { inputHash, execution };
    await this.breaker.run(() => redis.set(this.key(execution.workflowId), JSON.stringify(value), 'PX', Math.floor(ttl)), null);
  }

  /** Drops the cached executions of these workflow ids (cleanup removed them from Postgres). */
  async forget(workflowIds: string[]): Promise<void> {
    const redis = this.connections.redis;
    if (!this.breaker || !redis || workflowIds.length === 0) return;
    await this.breaker.run(() => Promise.all(workflowIds.map((id) => redis.del(this.key(id)))), []);
  }

  private key(workflowId: string): string {
    return `${this.connections.redisKeyPrefix}:wf-start:{${workflowId}}`;
  }
}
