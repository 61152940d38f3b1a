import { WorkflowError } from './workflow.error';

/** `handle.result({ timeout })` gave up waiting; the execution itself goes on. */
export class WorkflowResultTimeoutError extends WorkflowError {
  readonly code = 'WORKFLOW_RESULT_TIMEOUT';

  constructor(readonly executionId: string, readonly status: string, timeoutMs: number) {
    super(`execution ${executionId} has not finished within ${timeoutMs} ms (status "${status}"); it keeps running`);
    this.name = 'WorkflowResultTimeoutError';
  }
}
