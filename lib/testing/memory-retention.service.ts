import { Inject, Injectable } from '@nestjs/common';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import type { CleanupReport } from '../retention/retention.interfaces';
import type { RetentionService } from '../retention/retention.service';
import { WorkflowRetentionPolicy } from '../retention/workflow-retention.policy';
import { InboxService } from '../inbox/inbox.service';
import { IdempotencyStore } from '../storage/idempotency.store';
import { MemoryIdempotencyStore } from '../storage/memory/memory-idempotency.store';
import { MemoryWorkflowStore } from '../workflow/storage/memory-workflow.store';
import { WorkflowStore } from '../workflow/storage/workflow.store';
import { MemoryInboxService } from './memory-inbox.service';

/**
 * The RetentionService of IdempotencyTestingModule: `cleanup()` removes from memory what a Postgres cleanup pass
 * would (expired records, old released records and inbox ids, finished executions past their retention). It never
 * runs in the background: a test calls it when it wants it.
 */
@Injectable()
export class MemoryRetentionService implements Pick<RetentionService, 'cleanup'> {
  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    @Inject(IdempotencyStore) private readonly records: MemoryIdempotencyStore,
    @Inject(InboxService) private readonly inbox: MemoryInboxService,
    @Inject(WorkflowStore) private readonly workflows: MemoryWorkflowStore,
    private readonly policy: WorkflowRetentionPolicy,
  ) {}

  async cleanup(): Promise<CleanupReport | null> {
    const { releasedMs, inboxMs, workflowsMs } = this.options.retention;
    const report: CleanupReport = { records: this.records.prune(releasedMs), inbox: inboxMs === null ? 0 : this.inbox.prune(inboxMs), workflows: 0 };
    const policies = this.policy.policies();
    const removed = policies.flatMap(({ name, retentionMs }) => this.workflows.prune(name, retentionMs));
    removed.push(...this.workflows.prune({ notIn: policies.map((p) => p.name) }, workflowsMs));
    report.workflows = removed.length;
    await this.policy.forget(removed);
    return report;
  }
}
