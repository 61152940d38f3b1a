import { WorkflowError } from './workflow.error';

/** Raised by `start(…, { onConflict: 'error' })` (and by `resume`) when the workflow id already has a live or completed execution. */
export class WorkflowExistsError extends WorkflowError {
  readonly code = 'WORKFLOW_EXISTS';

  constructor(readonly workflowId: string, readonly executionId: string, readonly status: string) {
    super(`workflow id "${workflowId}" already has execution ${executionId} with status "${status}"`);
    this.name = 'WorkflowExistsError';
  }
}
