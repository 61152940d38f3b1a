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
   * execution has shown itself. Its first start skips the Postgres read before the step when `freshLock` still holds
   * (a job started again after a stall reads, as every other job does; so does one of an older version without it).
   */
  fresh?: boolean;
  /**
   * The BullMQ lock of the workflow job whose run added this step job: its Redis key and that run's token. Another
   * run of the execution starts only once that lock is lost (a recovery after Redis lost the job, a stalled job taken
   * over), and the token never comes back; so while the key holds the token, no other run has been, and no job of
   * this id can have run before this one. A run that has not heard of the other one yet (Redis flushed or restarted
   * empty under it) would otherwise add a job that a recovery run had already completed and removed.
   */
  freshLock?: RunLock;
}

/** @internal The lock of a workflow job while its run holds it (see `StepJobData.freshLock`). */
export interface RunLock {
  key: string;
  token: string;
}

/**
 * @internal What a step job returns to BullMQ. BullMQ copies it into the queue's events stream, which outlives
 * retention, so it is a marker and never the step's result: the outcome is read from Postgres (or handed over in
 * process, see `JobSignal`). New fields must stay free of user data.
 */
export type StepJobResult = { kind: 'checkpointed'; position: number } | { kind: 'stopped'; status: WorkflowStatus | null };
