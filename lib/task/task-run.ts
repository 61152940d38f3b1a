import type { StepJobData } from '../workflow/step-job';
import type { StepOutcome, WorkflowStore } from '../workflow/storage/workflow.store';
import type { StepCheckpoint } from '../workflow/workflow.interfaces';
import { inputHash } from '../workflow/workflow-identity';
import { uuidv7 } from '../workflow/uuidv7';
import { canonicalJson } from '../utils/canonical-json';

/** The stored name of a step attempt's timeout (StepTimeoutError). */
const TIMED_OUT_ERROR = 'StepTimeoutError';

/**
 * The task id of a task called from a workflow's `run()`: its parent execution and journal position, so a replay or
 * a retry of the same call finds the same record.
 */
export function childTaskId(parentExecutionId: string, position: number): string {
  return `${parentExecutionId}-${position}`;
}

/**
 * @internal Before an attempt of a task job: an enqueued task's execution becomes running; a task called from a
 * workflow gets (or finds) its record — a task execution with `parent_execution_id` set, the outcome itself being the
 * parent's checkpoint at that position — and it becomes running.
 */
export async function startTask(store: WorkflowStore, data: StepJobData): Promise<void> {
  await store.markRunning(data.task ? data.executionId : (await childRecord(store, data)).executionId);
}

/**
 * @internal After a task job's outcome is checkpointed (written now or found from an earlier attempt): finishes the
 * task's execution (or its record under the parent workflow) with it.
 */
export async function settleTask(store: WorkflowStore, data: StepJobData, checkpoint: StepCheckpoint): Promise<void> {
  await finishTask(store, data.task ? data.executionId : (await childRecord(store, data)).executionId, checkpoint);
}

/**
 * Finishes a task's execution with a checkpointed outcome: completed with the result, failed with the final error,
 * or timed_out when the last attempt timed out. A compare-and-set: one already finished (or cancelled) stays so.
 */
export async function finishTask(store: WorkflowStore, executionId: string, checkpoint: StepCheckpoint): Promise<void> {
  if (checkpoint.status === 'completed') {
    await store.finish(executionId, 'completed', { result: checkpoint.result ?? null });
    return;
  }
  const error = checkpoint.error ?? { name: 'Error', message: 'unknown error' };
  await store.finish(executionId, taskEndStatus({ status: 'failed', error }), { error });
}

/** The final status of a task execution whose step ended with `outcome`: failed, or timed_out when its last attempt timed out. */
export function taskEndStatus(outcome: StepOutcome): 'completed' | 'failed' | 'timed_out' {
  if (outcome.status === 'completed') return 'completed';
  return outcome.error.name === TIMED_OUT_ERROR ? 'timed_out' : 'failed';
}

/** The record of a task called from a workflow, inserted once per (parent, position) while it is live or completed. */
async function childRecord(store: WorkflowStore, data: StepJobData): Promise<{ executionId: string }> {
  const canonical = canonicalJson(data.args);
  const { execution } = await store.insert({
    executionId: uuidv7(),
    workflowId: childTaskId(data.executionId, data.position),
    workflowName: data.owner,
    input: JSON.parse(canonical) as unknown,
    inputHash: inputHash(data.owner, canonical),
    kind: 'task',
    parentExecutionId: data.executionId,
  });
  return execution;
}
