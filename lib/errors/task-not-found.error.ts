import { WorkflowError } from './workflow.error';

/** No task has this id (never enqueued, or removed by retention), or the method is not a registered `@Task()`. */
export class TaskNotFoundError extends WorkflowError {
  readonly code = 'TASK_NOT_FOUND';

  constructor(detail: string) {
    super(detail);
    this.name = 'TaskNotFoundError';
  }
}
