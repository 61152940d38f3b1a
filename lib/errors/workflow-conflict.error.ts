import { WorkflowError } from './workflow.error';

/** A workflow id is already used by an execution with another input (or another workflow); nothing was started. */
export class WorkflowConflictError extends WorkflowError {
  readonly code = 'WORKFLOW_CONFLICT';

  constructor(readonly workflowId: string, readonly executionId: string, detail: string) {
    super(`workflow id "${workflowId}" is already used by execution ${executionId} ${detail}; nothing was started. Use another workflow id for different work.`);
    this.name = 'WorkflowConflictError';
  }
}
