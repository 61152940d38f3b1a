import { WorkflowError } from './workflow.error';

/** The stored form of an error thrown by a workflow or a step. */
export interface StoredError {
  name: string;
  message: string;
  code?: string;
  stack?: string;
}

/** The execution failed; `error` is what the workflow (or a step it did not catch) threw. Resume it with `WorkflowClient.resume()`. */
export class WorkflowFailedError extends WorkflowError {
  readonly code: string = 'WORKFLOW_FAILED';

  constructor(readonly executionId: string, readonly error: StoredError) {
    super(`execution ${executionId} failed: ${error.name}: ${error.message}`);
    this.name = 'WorkflowFailedError';
  }
}
