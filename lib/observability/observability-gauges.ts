import { Inject, Injectable, OnApplicationBootstrap, Optional } from '@nestjs/common';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { OutboxService } from '../outbox/outbox.service';
import { IdempotencyConnections } from '../storage/idempotency-connections';
import { quoteIdent } from '../storage/postgres/idempotency.sql';
import { EXECUTIONS_TABLE } from '../workflow/storage/workflow.sql';
import { IdempotencyObserver } from './idempotency-observer';

const FINAL_STATUSES = ['completed', 'failed', 'cancelled', 'timed_out'];

/**
 * Registers the gauges read from Postgres at each metrics collection: unfinished workflow executions by status, and
 * the outbox's pending count, oldest pending age and dead messages per topic (when the outbox is configured).
 * Nothing in test mode (no Postgres).
 */
@Injectable()
export class ObservabilityGauges implements OnApplicationBootstrap {
  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly observer: IdempotencyObserver,
    @Optional() private readonly connections?: IdempotencyConnections,
    @Optional() private readonly outbox?: OutboxService,
  ) {}

  onApplicationBootstrap(): void {
    const { connections, outbox } = this;
    if (this.options.workflows.inline || !connections) return;
    const executions = `${quoteIdent(connections.schema)}.${quoteIdent(EXECUTIONS_TABLE)}`;
    this.observer.watchGauges(async () => {
      const { rows } = await connections.pool.query<{ status: string; n: number }>(
        `SELECT status, count(*)::int AS n FROM ${executions} WHERE status <> ALL($1::text[]) GROUP BY status`,
        [FINAL_STATUSES],
      );
      return rows.map((r) => ({ name: 'workflow.executions', value: r.n, attributes: { status: r.status } }));
    });
    if (!this.options.outbox || !outbox) return;
    this.observer.watchGauges(async () => {
      const stats = await outbox.stats();
      return Object.entries(stats.topics).flatMap(([topic, counts]) => [
        { name: 'outbox.pending', value: counts.pending, attributes: { topic } },
        { name: 'outbox.oldest_pending_age', value: (counts.oldestPendingAgeMs ?? 0) / 1000, attributes: { topic } },
        { name: 'outbox.dead', value: counts.dead, attributes: { topic } },
      ]);
    });
  }
}
