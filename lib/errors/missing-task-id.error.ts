import { WorkflowError } from './workflow.error';

/** A task with `identity: 'caller_provided'` was enqueued without a `taskId`. */
export class MissingTaskIdError extends WorkflowError {
  readonly code = 'MISSING_TASK_ID';

  constructor(readonly task: string) {
    super(`task "${task}" uses identity "caller_provided": pass { taskId } to TaskClient.enqueue()`);
    this.name = 'MissingTaskIdError';
  }
}
