import { WorkflowError } from './workflow.error';

/**
 * Raised by `TaskClient.enqueue(…, { taskId, onConflict: 'error' })` when the task id already has a pending, running
 * or completed execution. Names that execution, its status and, once completed, when it completed and its result
 * (read `result` instead of running the task again). A failed, cancelled or timed-out execution never raises it.
 */
export class TaskExistsError extends WorkflowError {
  readonly code = 'TASK_EXISTS';

  constructor(
    readonly taskId: string,
    /** The execution that holds the task id. */
    readonly existingExecutionId: string,
    readonly status: string,
    /** Set when `status` is 'completed'. */
    readonly completedAt?: Date | null,
    /** The stored result, when `status` is 'completed'. */
    readonly result?: unknown,
  ) {
    super(
      status === 'completed'
        ? `task with id "${taskId}" already completed successfully (execution ${existingExecutionId}); its result is on this error`
        : `task with id "${taskId}" is already ${status} (execution ${existingExecutionId}); wait for its handle instead of enqueuing it again`,
    );
    this.name = 'TaskExistsError';
  }
}
