import { Inject, Injectable } from '@nestjs/common';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { WorkflowRetention, WorkflowRetentionPolicy } from '../retention/workflow-retention.policy';
import { RegisteredWorkflow, WorkflowRegistry } from './workflow.registry';
import { WorkflowStartCache } from './workflow-start.cache';

/**
 * How long each registered workflow's finished executions are kept: its own `@Workflow({ retention })`,
 * else `retention.queues[its queue]`, else `retention.workflows` (30 days) — `retention.tasks` (7 days) for a `@Task()`.
 */
@Injectable()
export class RegisteredWorkflowRetention extends WorkflowRetentionPolicy {
  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly registry: WorkflowRegistry,
    private readonly startCache: WorkflowStartCache,
  ) {
    super();
  }

  forget(workflowIds: string[]): Promise<void> {
    return this.startCache.forget(workflowIds);
  }

  policies(): WorkflowRetention[] {
    return this.registry.all().map((workflow) => ({ name: workflow.name, retentionMs: this.retentionOf(workflow) }));
  }

  /** Milliseconds a finished execution of `workflow` is kept; 0 removes it as soon as it finishes. */
  retentionOf(workflow: RegisteredWorkflow): number {
    const { queuesMs, workflowsMs, tasksMs } = this.options.retention;
    return workflow.retentionMs ?? queuesMs[workflow.queue] ?? (workflow.task ? tasksMs : workflowsMs);
  }
}
