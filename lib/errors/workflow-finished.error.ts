import { WorkflowError } from './workflow.error';

/** `WorkflowClient.send()` to a workflow id whose newest execution has finished: no run would ever receive the message. */
export class WorkflowFinishedError extends WorkflowError {
  readonly code = 'WORKFLOW_FINISHED';

  constructor(readonly workflowId: string, readonly executionId: string, readonly status: string) {
    super(`workflow id "${workflowId}" has finished (execution ${executionId} is ${status}): messages reach only a pending or running execution; start or resume it first`);
    this.name = 'WorkflowFinishedError';
  }
}
