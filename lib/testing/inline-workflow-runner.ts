import { BeforeApplicationShutdown, Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import type { StepJobData } from '../workflow/step-job';
import { StepWorker } from '../workflow/step-worker';
import type { WorkflowJobData } from '../workflow/workflow-worker';
import { WorkflowExecutor } from '../workflow/workflow.executor';
import { WorkflowRegistry } from '../workflow/workflow.registry';
import { wakeJobKey, WorkflowQueues } from '../workflow/workflow-queues';
import { WorkflowStore } from '../workflow/storage/workflow.store';
import { setLongTimeout } from '../utils/long-timer';
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
    private readonly store: WorkflowStore,
  ) {}

  /** Ends the waits of suspended executions at shutdown. */
  private readonly stop = new AbortController();

  onModuleInit(): void {
    this.queues.setProcessor((queue, job) => this.process(queue, job));
  }

  /** Stops runs before their next step, starts no further attempt, and waits (at most `lockDuration`) for steps in progress. */
  async beforeApplicationShutdown(): Promise<void> {
    this.stop.abort();
    this.executor.abortAll();
    await this.queues.close();
    const deadline = Date.now() + this.options.workflows.lockDurationMs;
    while (!this.queues.isIdle && Date.now() < deadline) await sleep(10);
  }

  private process(queue: string, job: InlineJob): Promise<unknown> {
    if (this.registry.workflowQueues().includes(queue)) return this.runWorkflow(queue, (job.data as WorkflowJobData).executionId);
    return this.steps.process(queue, { id: job.id, data: job.data as StepJobData, attemptsMade: job.attemptsMade });
  }

  /**
   * Runs an execution; a suspended one (sleep, recv, a child) runs again at its wake-up time or when a message or a
   * child wakes it, as BullMQ's delayed job would (the inline job stays active meanwhile).
   */
  private async runWorkflow(queue: string, executionId: string): Promise<unknown> {
    for (;;) {
      let wake: (() => void) | undefined;
      let woken = false;
      const unsubscribe = this.queues.wait(queue, wakeJobKey(executionId), () => {
        woken = true;
        wake?.();
      });
      try {
        const outcome = await this.executor.execute(executionId);
        if (outcome === 'finished') return outcome;
        if (outcome === 'released' && this.queues.isClosed) return outcome;
        if (typeof outcome === 'object' && !woken && !(await this.store.wakeRequested(executionId))) {
          await new Promise<void>((resolve) => {
            const timer = outcome.suspendedUntil === Infinity ? undefined : setLongTimeout(resolve, outcome.suspendedUntil - Date.now());
            wake = () => {
              timer?.clear();
              resolve();
            };
            this.stop.signal.addEventListener('abort', wake, { once: true });
          });
        }
        if (this.stop.signal.aborted) return 'released';
      } finally {
        unsubscribe();
      }
    }
  }
}
