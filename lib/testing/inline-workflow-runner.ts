import { BeforeApplicationShutdown, Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import type { StepJobData } from '../workflow/step-job';
import { StepWorker } from '../workflow/step-worker';
import type { WorkflowJobData } from '../workflow/workflow-worker';
import { WorkflowExecutor } from '../workflow/workflow.executor';
import { WorkflowRegistry } from '../workflow/workflow.registry';
import { WorkflowQueues } from '../workflow/workflow-queues';
import { InlineJob, InlineWorkflowQueues } from './inline-workflow-queues';

/**
 * Workers of IdempotencyTestingModule: a workflow-queue job replays its execution through the library's executor,
 * a step-queue job runs through the library's step worker (checkpoint check, step context, timeout, checkpoint) —
 * the same code as with BullMQ, in this process. On shutdown runs stop, no attempt starts, and steps in progress finish.
 */
@Injectable()
export class InlineWorkflowRunner implements OnModuleInit, BeforeApplicationShutdown {
  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    @Inject(WorkflowQueues) private readonly queues: InlineWorkflowQueues,
    private readonly registry: WorkflowRegistry,
    private readonly executor: WorkflowExecutor,
    private readonly steps: StepWorker,
  ) {}

  onModuleInit(): void {
    this.queues.setProcessor((queue, job) => this.process(queue, job));
  }

  /** Stops runs before their next step, starts no further attempt, and waits (at most `lockDuration`) for steps in progress. */
  async beforeApplicationShutdown(): Promise<void> {
    this.executor.abortAll();
    await this.queues.close();
    const deadline = Date.now() + this.options.workflows.lockDurationMs;
    while (!this.queues.isIdle && Date.now() < deadline) await sleep(10);
  }

  private process(queue: string, job: InlineJob): Promise<unknown> {
    if (this.registry.workflowQueues().includes(queue)) {
      return this.executor.execute((job.data as WorkflowJobData).executionId);
    }
    return this.steps.process(queue, { id: job.id, data: job.data as StepJobData, attemptsMade: job.attemptsMade });
  }
}
