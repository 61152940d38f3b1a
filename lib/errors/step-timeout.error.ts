import { WorkflowError } from './workflow.error';

/** A step attempt ran longer than its `timeout`; the attempt is abandoned (its late result is never written) and counts as failed. */
export class StepTimeoutError extends WorkflowError {
  readonly code = 'STEP_TIMED_OUT';

  constructor(readonly step: string, readonly timeoutMs: number) {
    super(`step "${step}" did not finish within ${timeoutMs} ms`);
    this.name = 'StepTimeoutError';
  }
}
