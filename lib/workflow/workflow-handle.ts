import { RECOVERY_ATTEMPTS_EXHAUSTED, RecoveryAttemptsExhaustedError } from '../errors/recovery-attempts-exhausted.error';
import { WorkflowCancelledError } from '../errors/workflow-cancelled.error';
import { WorkflowFailedError } from '../errors/workflow-failed.error';
import { WorkflowNotFoundError } from '../errors/workflow-not-found.error';
import { WorkflowResultTimeoutError } from '../errors/workflow-result-timeout.error';
import { WorkflowTimeoutError } from '../errors/workflow-timeout.error';
import type { Duration } from '../utils/duration';
import { parseDuration } from '../utils/duration';
import type { WorkflowStore } from './storage/workflow.store';
import type { WorkflowExecution, WorkflowStatus } from './workflow.interfaces';
import { workflowJobId, WorkflowQueues } from './workflow-queues';
import { sleep } from '../utils/long-timer';

/** Options of `handle.result()`. */
export interface ResultOptions {
  /** Give up waiting after this long with `WorkflowResultTimeoutError` (the execution goes on). Default: wait. */
  timeout?: Duration;
}

const FINAL: readonly WorkflowStatus[] = ['completed', 'failed', 'cancelled', 'timed_out'];

/** A started (or found) execution: its ids, its status, and its result once it finishes. */
export class WorkflowHandle<R = unknown> {
  constructor(
    /** The workflow id (caller-provided or derived from the identity strategy). */
    readonly workflowId: string,
    /** This execution's id; a new execution of the same workflow id after a failure has another. */
    readonly executionId: string,
    private readonly queue: string,
    private readonly store: WorkflowStore,
    private readonly queues: WorkflowQueues,
    private readonly pollMs: number,
  ) {}

  /** The current status, from Postgres. */
  async status(): Promise<WorkflowStatus> {
    return (await this.execution()).status;
  }

  /** The execution as stored. */
  async execution(): Promise<WorkflowExecution> {
    const execution = await this.store.get(this.executionId);
    if (!execution) throw new WorkflowNotFoundError(`execution ${this.executionId} no longer exists (retention may have removed it)`);
    return execution;
  }

  /**
   * Waits for the execution to finish and returns its result; throws WorkflowFailedError, WorkflowCancelledError or
   * WorkflowTimeoutError for the other final statuses. A completed execution answers at once with its stored result.
   */
  async result(options: ResultOptions = {}): Promise<R> {
    const timeoutMs = options.timeout === undefined ? undefined : parseDuration(options.timeout);
    if (typeof timeoutMs === 'object') throw new TypeError(`result({ timeout }): ${timeoutMs.error}`);
    const deadline = timeoutMs === undefined ? Infinity : Date.now() + timeoutMs;
    for (;;) {
      let wake: (() => void) | undefined;
      let woken = false;
      const unsubscribe = this.queues.wait(this.queue, workflowJobId(this.executionId), () => {
        woken = true;
        wake?.();
      });
      try {
        const execution = await this.execution();
        if (FINAL.includes(execution.status)) return this.settle(execution);
        const remaining = deadline - Date.now();
        if (remaining <= 0) throw new WorkflowResultTimeoutError(this.executionId, execution.status, timeoutMs as number);
        if (!woken) {
          const pause = sleep(Math.min(this.pollMs, remaining));
          wake = pause.wake;
          await pause.done;
        }
      } finally {
        unsubscribe();
      }
    }
  }

  private settle(execution: WorkflowExecution): R {
    switch (execution.status) {
      case 'completed':
        return execution.result as R;
      case 'cancelled':
        throw new WorkflowCancelledError(this.executionId);
      case 'timed_out':
        throw new WorkflowTimeoutError(this.executionId);
      default: {
        const error = execution.error ?? { name: 'Error', message: 'unknown error' };
        if (error.name === RECOVERY_ATTEMPTS_EXHAUSTED) throw new RecoveryAttemptsExhaustedError(this.executionId, error);
        throw new WorkflowFailedError(this.executionId, error);
      }
    }
  }
}
