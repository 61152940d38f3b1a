import type { TransactionIsolation } from '../transaction/transaction-options';
import type { StoredError } from '../errors/workflow-failed.error';
import type { Duration } from '../utils/duration';

/** How a start without an explicit `workflowId` is identified. */
export type WorkflowIdentity = 'strict' | 'caller_provided' | 'always_unique';

/** Options of `@Workflow()`. */
export interface WorkflowOptions {
  /** Name stored with each execution; recovery finds the code by it, so keep it stable. Default: the class name. */
  name?: string;
  /** BullMQ queue of this workflow's runs. Default `"workflows"`. */
  queue?: string;
  /** Identity of a start without `workflowId`: `strict` (default, hash of name + canonical input), `caller_provided`, `always_unique` (UUIDv7). */
  identity?: WorkflowIdentity;
  /** An execution still unfinished this long after it was started ends as `timed_out`. Default: none. */
  timeout?: Duration;
  /** Finished executions (and their steps) are deleted this long after they finish. Default `"30d"`. */
  retention?: Duration;
}

/** Backoff between step attempts: a fixed delay in ms, or BullMQ's `{ type: 'fixed' | 'exponential', delay }`. */
export type StepBackoff = number | { type: 'fixed' | 'exponential'; delay: number };

/** Options of `@Step()`. */
export interface StepOptions {
  /** Name stored in the checkpoint; replay checks it. Default: the method name. */
  name?: string;
  /** Attempts in all, including the first. Default 1. */
  attempts?: number;
  /** Delay between attempts. Default: none. */
  backoff?: StepBackoff;
  /** An attempt that runs longer is abandoned and counts as failed; its late result is never written. Default: none. */
  timeout?: Duration;
  /** BullMQ queue of this step's jobs. Default `"steps"`. */
  queue?: string;
  /**
   * Run the step in a Postgres transaction of the library (`currentTransaction()`) that also writes its checkpoint:
   * its database writes then happen exactly once, even when a worker dies mid-step or two workers finish it. Default false.
   */
  transaction?: boolean;
  /** Isolation level of that transaction. Default `"read committed"`. */
  isolation?: TransactionIsolation;
}

/** What an execution runs: a `@Workflow()` or a `@Task()` (both live in the executions table, sharing one id namespace). */
export type ExecutionKind = 'workflow' | 'task';

/** Status of an execution. `failed`, `cancelled` and `timed_out` free its workflow id for a new execution. */
export type WorkflowStatus = 'pending' | 'running' | 'completed' | 'failed' | 'cancelled' | 'timed_out';

/** Statuses that do not block a new execution with the same workflow id. */
export const RELEASED_WORKFLOW_STATUSES: readonly WorkflowStatus[] = ['failed', 'cancelled', 'timed_out'];

/** Options of `WorkflowClient.start()`. */
export interface StartWorkflowOptions {
  /** The workflow id; always wins over the workflow's identity strategy. */
  workflowId?: string;
  /** When the id already has a pending, running or completed execution: return its handle (default) or throw `WorkflowExistsError`. */
  onConflict?: 'return-existing' | 'error';
}

/** Filter of `WorkflowClient.list()`. */
export interface ListWorkflowsOptions {
  status?: WorkflowStatus | WorkflowStatus[];
  /** Workflow name (or class). */
  workflow?: string | (abstract new (...args: never[]) => unknown);
  /** Only the child workflows started by this execution. */
  parentExecutionId?: string;
  /** Only executions of this kind. Default: workflows only (`TaskClient.list()` lists tasks). */
  kind?: ExecutionKind;
  /** Default 100, at most 1000. */
  limit?: number;
}

/** One execution, as stored. */
export interface WorkflowExecution {
  executionId: string;
  workflowId: string;
  workflowName: string;
  /** 'task' for a `@Task()` execution (its workflow id is the task id, its workflow name the task name). */
  kind: ExecutionKind;
  status: WorkflowStatus;
  input: unknown;
  result: unknown;
  error: StoredError | null;
  recoveryAttempts: number;
  createdAt: Date;
  updatedAt: Date;
  completedAt: Date | null;
  /** When an execution with a workflow `timeout` times out. */
  deadlineAt: Date | null;
  /** The execution that started this one with `startChild`/`runChild`; null for a workflow started by a client. */
  parentExecutionId: string | null;
  /** While the execution waits in `sleep`, `recv` or for a child with no run in progress: when it wakes (null: not suspended; a date far ahead: on a message or a child only). */
  suspendedUntil: Date | null;
}

/** One step checkpoint, as stored. */
export interface StepCheckpoint {
  position: number;
  name: string;
  status: 'completed' | 'failed';
  result: unknown;
  error: StoredError | null;
  attempts: number;
  completedAt: Date;
  /** The order in which this outcome was recorded in its execution (0, 1, 2 …); replay hands outcomes to the workflow in this order. */
  sequence: number;
  /** Hash of the step's canonical arguments (null for checkpoints written before it was recorded); replay compares it. */
  argsHash: string | null;
}

/** What a step sees through `currentStep()`. */
export interface StepContext {
  executionId: string;
  workflowId: string;
  workflowName: string;
  stepName: string;
  /** The step's position in the execution (0, 1, 2, … in call order). */
  position: number;
  /** This attempt, from 1. */
  attempt: number;
  /** Stable across attempts and recoveries of this step: pass it to external APIs as their idempotency key. */
  idempotencyKey: string;
}
