import { WorkflowError } from './workflow.error';
import type { StoredError } from './workflow-failed.error';

/**
 * A child workflow started with `startChild`/`runChild` did not complete: it failed, was cancelled or timed out.
 * The parent sees this error from `runChild()` or the child handle's `result()`, live and on every replay; catch it to
 * compensate, or let it fail the parent.
 */
export class ChildWorkflowFailedError extends WorkflowError {
  readonly code = 'CHILD_WORKFLOW_FAILED';

  constructor(
    readonly workflowId: string,
    readonly executionId: string,
    /** The child's final status: failed, cancelled, timed_out (or "missing" when retention removed it). */
    readonly status: string,
    /** What the child failed with (its stored error). */
    readonly error: StoredError,
  ) {
    super(`child workflow "${workflowId}" (execution ${executionId}) ended ${status}: ${error.name}: ${error.message}`);
    this.name = 'ChildWorkflowFailedError';
  }
}
