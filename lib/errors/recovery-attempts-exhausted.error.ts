import { WorkflowFailedError, type StoredError } from './workflow-failed.error';

/** The stored name of the failure; `WorkflowHandle.result()` throws this class for it. */
export const RECOVERY_ATTEMPTS_EXHAUSTED = 'RecoveryAttemptsExhaustedError';

/**
 * The execution was interrupted (crash, lost job, Redis loss) more than `workflows.maxRecoveryAttempts` times and
 * ended as failed. It is a `WorkflowFailedError`: fix the cause, then `WorkflowClient.resume()` it.
 */
export class RecoveryAttemptsExhaustedError extends WorkflowFailedError {
  override readonly code = 'RECOVERY_ATTEMPTS_EXHAUSTED';

  constructor(executionId: string, error: StoredError) {
    super(executionId, error);
    this.name = RECOVERY_ATTEMPTS_EXHAUSTED;
  }

  /** The stored form written when an execution runs out of recoveries. */
  static stored(maxRecoveries: number): StoredError {
    return {
      name: RECOVERY_ATTEMPTS_EXHAUSTED,
      code: 'RECOVERY_ATTEMPTS_EXHAUSTED',
      message: `the execution was interrupted or re-enqueued more than ${maxRecoveries} times (workflows.maxRecoveryAttempts); resume it once the cause is fixed`,
    };
  }
}
