import { WorkflowError } from './workflow.error';

/** The execution ran past its workflow-level `timeout` and ended with status `timed_out`. */
export class WorkflowTimeoutError extends WorkflowError {
  readonly code = 'WORKFLOW_TIMED_OUT';

  constructor(readonly executionId: string, timeoutMs?: number) {
    super(`execution ${executionId} timed out${timeoutMs === undefined ? '' : ` after ${timeoutMs} ms`}`);
    this.name = 'WorkflowTimeoutError';
  }
}
