import { BeforeApplicationShutdown, Inject, Injectable, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { StepWorker } from './step-worker';
import { WorkflowExecutor } from './workflow.executor';
import { WorkflowReconciler } from './workflow.reconciler';
import { WorkflowRegistry } from './workflow.registry';
import { WorkflowQueues } from './workflow-queues';
import { WorkflowWorker } from './workflow-worker';
import { QueueSettings } from '../queues/queue-settings';

/**
 * Starts and stops the workflow machinery in order. Nothing starts when no workflow is registered. On shutdown,
 * runs in this process are handed back (their executions return to pending), steps in progress finish and are
 * checkpointed, then workers, events and queues close.
 */
@Injectable()
export class WorkflowOrchestrator implements OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown {
  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly registry: WorkflowRegistry,
    private readonly queues: WorkflowQueues,
    private readonly executor: WorkflowExecutor,
    private readonly stepWorker: StepWorker,
    private readonly workflowWorker: WorkflowWorker,
    private readonly reconciler: WorkflowReconciler,
    private readonly queueSettings: QueueSettings,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    // Every explorer declared its queues at module init: a `queues` entry nobody uses is a typo.
    this.queueSettings.assertKnown();
    if (this.registry.isEmpty) return;
    await this.queues.init();
    await this.queues.listen([...this.registry.stepQueues(), ...this.registry.workflowQueues()]);
    if (!this.options.workflows.workers) return;
    this.stepWorker.start();
    this.workflowWorker.start();
    this.reconciler.start();
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.reconciler.stop();
    this.executor.abortAll();
    await this.workflowWorker.close();
    await this.stepWorker.close();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.queues.close();
  }
}
