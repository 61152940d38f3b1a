import type { TraceCarrier } from '../observability/idempotency-observer';
import type { WorkflowStatus } from './workflow.interfaces';

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
  /** The trace context of the run that called the step (W3C `traceparent`), when traces are on. */
  trace?: TraceCarrier;
  /** A task enqueued by `TaskClient`: the step is its execution's only one, and its outcome finishes the execution (lib/task). */
  task?: true;
  /**
   * Set by the first run of an execution for a position it found without a checkpoint, as long as no other run of the
   * execution has shown itself: no job of this id can have run before this one, so its first start skips the
   * Postgres read before the step (a job started again after a stall reads, as every other job does).
   */
  fresh?: boolean;
}

/**
 * @internal What a step job returns to BullMQ. BullMQ copies it into the queue's events stream, which outlives
 * retention, so it is a marker and never the step's result: the outcome is read from Postgres (or handed over in
 * process, see `JobSignal`). New fields must stay free of user data.
 */
export type StepJobResult = { kind: 'checkpointed'; position: number } | { kind: 'stopped'; status: WorkflowStatus | null };
