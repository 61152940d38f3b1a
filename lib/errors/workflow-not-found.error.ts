import { WorkflowError } from './workflow.error';

/** No execution (or no registered workflow) matches what was asked for. */
export class WorkflowNotFoundError extends WorkflowError {
  readonly code = 'WORKFLOW_NOT_FOUND';

  constructor(message: string) {
    super(message);
    this.name = 'WorkflowNotFoundError';
  }
}
