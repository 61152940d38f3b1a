import type { WorkflowStore } from '../workflow/storage/workflow.store';
import type { StepCheckpoint } from '../workflow/workflow.interfaces';

/** The stored name of a step attempt's timeout (StepTimeoutError). */
const TIMED_OUT_ERROR = 'StepTimeoutError';

/**
 * @internal Finishes a task's execution with the outcome checkpointed at its only position (called by the step worker
 * after the checkpoint, written now or found from an earlier attempt): completed with the result, failed with the
 * final error, or timed_out when the last attempt timed out. A compare-and-set: an execution already finished (or
 * cancelled meanwhile) stays as it is.
 */
export async function finishTask(store: WorkflowStore, executionId: string, checkpoint: StepCheckpoint): Promise<void> {
  if (checkpoint.status === 'completed') {
    await store.finish(executionId, 'completed', { result: checkpoint.result ?? null });
    return;
  }
  const error = checkpoint.error ?? { name: 'Error', message: 'unknown error' };
  await store.finish(executionId, error.name === TIMED_OUT_ERROR ? 'timed_out' : 'failed', { error });
}
