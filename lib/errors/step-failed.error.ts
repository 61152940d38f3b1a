import { WorkflowError } from './workflow.error';
import type { StoredError } from './workflow-failed.error';

/**
 * A step failed after its last attempt. The workflow sees this error, with the original error's name and
 * message, both live and on every replay (a stored failure is thrown again, not retried).
 */
export class StepFailedError extends WorkflowError {
  readonly code = 'STEP_FAILED';

  constructor(readonly step: string, readonly position: number, readonly attempts: number, readonly error: StoredError) {
    super(`step "${step}" (#${position}) failed after ${attempts} attempt(s): ${error.name}: ${error.message}`);
    this.name = 'StepFailedError';
  }
}
