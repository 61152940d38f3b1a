import type { StepCheckpoint, WorkflowStatus } from './workflow.interfaces';

/** @internal The data of a step job. */
export interface StepJobData {
  executionId: string;
  workflowId: string;
  workflowName: string;
  /** The workflow that declares the step (its instance runs it). */
  owner: string;
  step: string;
  position: number;
  args: unknown[];
  /** Hash of the canonical arguments, stored with the checkpoint (absent in jobs of older versions). */
  argsHash?: string;
}

/** @internal What a step job returns: the checkpoint (written or adopted), or why the step did not run. */
export type StepJobResult = { kind: 'checkpoint'; checkpoint: StepCheckpoint } | { kind: 'stopped'; status: WorkflowStatus | null };

/** @internal Type guard for a value received from a job event. */
export function isStepJobResult(value: unknown): value is StepJobResult {
  if (typeof value !== 'object' || value === null) return false;
  const kind = (value as { kind?: unknown }).kind;
  return kind === 'checkpoint' || kind === 'stopped';
}

/** @internal Checkpoints received as JSON carry their date as a string. */
export function reviveCheckpoint(checkpoint: StepCheckpoint): StepCheckpoint {
  return checkpoint.completedAt instanceof Date ? checkpoint : { ...checkpoint, completedAt: new Date(checkpoint.completedAt) };
}
