import { WorkflowError } from './workflow.error';

/** The execution was cancelled: no further step starts, and its result is not available. */
export class WorkflowCancelledError extends WorkflowError {
  readonly code = 'WORKFLOW_CANCELLED';

  constructor(readonly executionId: string) {
    super(`execution ${executionId} was cancelled`);
    this.name = 'WorkflowCancelledError';
  }
}
