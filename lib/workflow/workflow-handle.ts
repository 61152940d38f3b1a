import { WorkflowCancelledError } from '../errors/workflow-cancelled.error';
import { WorkflowFailedError } from '../errors/workflow-failed.error';
import { WorkflowNotFoundError } from '../errors/workflow-not-found.error';
import { WorkflowResultTimeoutError } from '../errors/workflow-result-timeout.error';
import { WorkflowTimeoutError } from '../errors/workflow-timeout.error';
import type { Duration } from '../utils/duration';
import { parseDuration } from '../utils/duration';
import type { WorkflowStore } from './storage/workflow.store';
import type { WorkflowExecution, WorkflowStatus } from './workflow.interfaces';
import { POSTGRES_FALLBACK_POLLS, workflowJobId, WorkflowQueues } from './workflow-queues';

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
   * The wait is woken by the workflow job's events; between them each poll asks Redis whether the job is still live
   * and reads Postgres only when it is not, or every POSTGRES_FALLBACK_POLLS polls.
   */
  async result(options: ResultOptions = {}): Promise<R> {
    const timeoutMs = options.timeout === undefined ? undefined : parseDuration(options.timeout);
    if (typeof timeoutMs === 'object') throw new TypeError(`result({ timeout }): ${timeoutMs.error}`);
    const deadline = timeoutMs === undefined ? Infinity : Date.now() + timeoutMs;
    const jobId = workflowJobId(this.executionId);
    let wake: (() => void) | undefined;
    let woken = false;
    // Subscribed before the first read, so a finish between the read and the wait is not missed.
    const unsubscribe = this.queues.wait(this.queue, jobId, () => {
      woken = true;
      wake?.();
    });
    try {
      let status: WorkflowStatus | undefined;
      for (let polls = 0, read = true; ; ) {
        if (read) {
          const execution = await this.execution();
          if (FINAL.includes(execution.status)) return this.settle(execution);
          status = execution.status;
        }
        const remaining = deadline - Date.now();
        if (remaining <= 0) throw new WorkflowResultTimeoutError(this.executionId, status ?? 'pending', timeoutMs as number);
        if (!woken) {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, Math.min(this.pollMs, remaining));
            wake = () => {
              clearTimeout(timer);
              resolve();
            };
          });
          wake = undefined;
        }
        if (woken) {
          woken = false;
          read = true;
        } else {
          read = ++polls % POSTGRES_FALLBACK_POLLS === 0 || (await this.queues.isLive(this.queue, jobId)) !== true;
        }
      }
    } finally {
      unsubscribe();
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
      default:
        throw new WorkflowFailedError(this.executionId, execution.error ?? { name: 'Error', message: 'unknown error' });
    }
  }
}
