import { WorkflowHandle } from '../workflow/workflow-handle';

/**
 * An enqueued (or found) task execution: `status()`, and `result({ timeout? })` — the stored result once it
 * completed (at once for a completed one, the cached result of a duplicate enqueue), or the error of its final status
 * (WorkflowFailedError, WorkflowCancelledError, WorkflowTimeoutError; WorkflowResultTimeoutError when `timeout` passes).
 */
export class TaskHandle<R = unknown> extends WorkflowHandle<R> {
  /** The task id (caller-provided or derived from the task's identity strategy). */
  get taskId(): string {
    return this.workflowId;
  }
}
