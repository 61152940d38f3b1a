import { WorkflowError } from './workflow.error';

/** A task id is already used by an execution with other arguments (or of another task or a workflow); nothing was enqueued. */
export class TaskConflictError extends WorkflowError {
  readonly code = 'TASK_CONFLICT';

  constructor(readonly taskId: string, readonly existingExecutionId: string, detail: string) {
    super(`task id "${taskId}" is already used by execution ${existingExecutionId} ${detail}; nothing was enqueued. Use another task id for different work.`);
    this.name = 'TaskConflictError';
  }
}
