import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown, Optional } from '@nestjs/common';
import { LibraryLogger } from '../observability/library-logger';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { IdempotencyConnections } from '../storage/idempotency-connections';
import { CleanupReport } from './retention.interfaces';
import { LeaseLock } from '../storage/postgres/lease-lock';
import { retentionSql } from './retention.sql';
import { WorkflowRetentionPolicy } from './workflow-retention.policy';
import { LongTimer, setLongInterval } from '../utils/long-timer';

/**
 * Deletes what retention says may go, in short batches, on one instance at a time (a lease row, see
 * LeaseLock): expired HTTP and method records, old inbox ids, delivered outbox messages, and finished workflow executions with their steps
 * (per workflow: `@Workflow({ retention })`, else `retention.queues[queue]`, else `retention.workflows`).
 * Runs every `retention.cleanupInterval` in the background; `cleanup()` runs a pass on demand.
 */
@Injectable()
export class RetentionService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger: Logger = new LibraryLogger('Idempotency');
  private timer?: LongTimer;
  private running?: Promise<unknown>;

  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly connections: IdempotencyConnections,
    @Optional() private readonly workflows?: WorkflowRetentionPolicy,
  ) {}

  onApplicationBootstrap(): void {
    const interval = this.options.retention.intervalMs;
    if (interval === null) return;
    this.timer = setLongInterval(() => {
      if (this.running) return;
      this.running = this.cleanup()
        .catch((err: Error) => this.logger.warn(`retention cleanup failed: ${err.message}`))
        .finally(() => (this.running = undefined));
    }, interval, { unref: true });
  }

  async onApplicationShutdown(): Promise<void> {
    this.timer?.clear();
    await this.running;
  }

  /** One cleanup pass; `null` when another instance is running one right now. */
  async cleanup(): Promise<CleanupReport | null> {
    const sql = retentionSql(this.connections.schema);
    const lock = new LeaseLock(this.connections, sql.lockKey);
    const pass = await lock.run(async () => {
      const { batchSize, releasedMs, inboxMs } = this.options.retention;
      const report: CleanupReport = { records: 0, inbox: 0, workflows: 0 };
      report.records = await this.drain(sql.records, [releasedMs, batchSize], batchSize);
      if (inboxMs !== null) report.inbox = await this.drain(sql.inbox, [inboxMs, batchSize], batchSize);
      const outbox = this.options.outbox;
      if (outbox) report.outbox = await this.drain(sql.outbox, [outbox.retentionMs, batchSize], batchSize);
      const policies = this.workflows?.policies() ?? [];
      const forget = (rows: { workflow_id: string }[]) => this.workflows?.forget(rows.map((r) => r.workflow_id));
      for (const { name, retentionMs } of policies) {
        report.workflows += await this.drain(sql.workflows, [name, retentionMs, batchSize], batchSize, forget);
      }
      const known = policies.map((p) => p.name);
      report.workflows += await this.drain(sql.otherWorkflows, [known, this.options.retention.workflowsMs, batchSize], batchSize, forget);
      return report;
    });
    return pass.acquired ? pass.value : null;
  }

  /** Repeats one batched delete until a batch comes back short; each batch commits on its own. */
  private async drain<R extends object>(
    text: string,
    values: unknown[],
    batchSize: number,
    onDeleted?: (rows: R[]) => Promise<void> | undefined,
  ): Promise<number> {
    let total = 0;
    for (;;) {
      const { rowCount, rows } = await this.connections.pool.query<R>(text, values);
      total += rowCount ?? 0;
      if (onDeleted && rows.length > 0) await onDeleted(rows);
      if ((rowCount ?? 0) < batchSize) return total;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
}
