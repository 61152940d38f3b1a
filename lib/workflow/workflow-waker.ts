import { Injectable, Logger } from '@nestjs/common';
import { LibraryLogger } from '../observability/library-logger';
import { WorkflowStore } from './storage/workflow.store';
import type { WorkflowExecution } from './workflow.interfaces';
import { WorkflowRegistry } from './workflow.registry';
import { WorkflowQueues } from './workflow-queues';

/**
 * Wakes executions that wait: after a message was stored for one (`send`) or one of its children ended. Postgres
 * already holds the wake request; this makes the run due now — the waits of a run in this process check again, a
 * suspended execution's delayed job is promoted. When Redis cannot be reached the reconciler wakes it later.
 */
@Injectable()
export class WorkflowWaker {
  private readonly logger: Logger = new LibraryLogger('Workflows');

  constructor(
    private readonly store: WorkflowStore,
    private readonly registry: WorkflowRegistry,
    private readonly queues: WorkflowQueues,
  ) {}

  /** Makes the run of an execution whose wake was requested in Postgres due now. */
  async wake(execution: WorkflowExecution): Promise<void> {
    const workflow = this.registry.find(execution.workflowName);
    if (!workflow) return; // another application's workflow: its reconciler wakes it
    // A run in progress (in any process) checks its waits again; a suspended one's job becomes due.
    await Promise.all([
      this.queues.publishRunWake(workflow.queue, execution.executionId).catch(() => undefined),
      this.queues.wakeRun(workflow.queue, workflow.name, execution.executionId).catch((err: Error) => {
        this.logger.warn(`could not wake execution ${execution.executionId} (${err.message}); the reconciler will`);
      }),
    ]);
  }

  /** A child ended: asks its parent to wake (it may wait for the child's result) and makes it due. */
  async wakeParent(parentExecutionId: string): Promise<void> {
    try {
      const parent = await this.store.requestWake(parentExecutionId);
      if (parent) await this.wake(parent);
    } catch (err) {
      this.logger.warn(`could not wake parent execution ${parentExecutionId} (${(err as Error).message}); it checks again on its next poll or recovery`);
    }
  }
}
