import type { TransactionIsolation } from '../transaction/transaction-options';
import type { Duration } from '../utils/duration';
import type { StepBackoff, WorkflowIdentity, WorkflowStatus } from '../workflow/workflow.interfaces';

/** Options of `@Task()`. */
export interface TaskOptions {
  /** Name stored with each execution (and in a workflow's checkpoint); keep it stable. Default: the method name. */
  name?: string;
  /** BullMQ queue of this task's jobs. Default `"tasks"`. */
  queue?: string;
  /** Attempts in all, including the first (BullMQ `attempts`). Default 1. */
  attempts?: number;
  /** Delay between attempts (BullMQ `backoff`): ms, or `{ type: 'fixed' | 'exponential', delay }`. */
  backoff?: StepBackoff;
  /** An attempt running longer is abandoned; when the last attempt times out the task ends as `timed_out`. Default: none. */
  timeout?: Duration;
  /** Identity of an enqueue without `taskId`: `strict` (default: hash of name + canonical arguments), `caller_provided`, `always_unique`. */
  identity?: WorkflowIdentity;
  /** Finished executions are deleted this long after they finish; the task id is free again then. Default: `retention.queues[queue]`, else `retention.tasks` ("7d"). */
  retention?: Duration;
  /** Run the task in a Postgres transaction of the library (`currentTransaction()`) that also stores its result. Default false. */
  transaction?: boolean;
  /** Isolation level of that transaction. Default `"read committed"`. */
  isolation?: TransactionIsolation;
}

/** Options of `TaskClient.enqueue()`. */
export interface EnqueueTaskOptions {
  /** The task id: a duplicate enqueue while its execution is pending, running or completed returns that execution. Wins over the identity strategy. */
  taskId?: string;
  /** When the id already has a pending, running or completed execution: return its handle (default) or throw `TaskExistsError`. */
  onConflict?: 'return-existing' | 'error';
  /** Run no earlier than this long from now (BullMQ `delay`). */
  delay?: Duration;
}

/** Filter of `TaskClient.list()`. */
export interface ListTasksOptions {
  status?: WorkflowStatus | WorkflowStatus[];
  /** Task name. */
  task?: string;
  /** Default 100, at most 1000. */
  limit?: number;
}
