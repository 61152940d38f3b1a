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
import { POSTGRES_FALLBACK_POLLS, workflowJobId, WorkflowQueues } from './workflow-queues';
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
    /** Retention "0": the last waiter to read the outcome removes the finished execution. */
    private readonly dropWhenRead = false,
  ) {}

  /** The current status, from Postgres. */
  async status(): Promise<WorkflowStatus> {
    return (await this.execution()).status;
  }

  /** The execution as stored. */
  async execution(): Promise<WorkflowExecution> {
    const execution = await this.store.get(this.executionId);
    if (!execution) throw this.notFound();
    return execution;
  }

  /**
   * Waits for the execution to finish and returns its result; throws WorkflowFailedError, WorkflowCancelledError or
   * WorkflowTimeoutError for the other final statuses. A completed execution answers at once with its stored result.
   * A call that began before the execution finished always gets its outcome, even under retention "0": there the call
   * is registered in Postgres while it waits, and the execution is removed only once every waiter has read it.
   * The wait is woken by the workflow job's events; between them each poll asks Redis whether the job is still live
   * and reads Postgres only when it is not, or every POSTGRES_FALLBACK_POLLS polls.
   */
  async result(options: ResultOptions = {}): Promise<R> {
    const timeoutMs = options.timeout === undefined ? undefined : parseDuration(options.timeout);
    if (typeof timeoutMs === 'object') throw new TypeError(`result({ timeout }): ${timeoutMs.error}`);
    const deadline = timeoutMs === undefined ? Infinity : Date.now() + timeoutMs;
    const jobId = workflowJobId(this.executionId);
    let woken = false;
    let wake: (() => void) | undefined;
    // Listen before registering, so a finish between the two is not missed.
    const unsubscribe = this.queues.wait(this.queue, jobId, () => {
      woken = true;
      wake?.();
    });
    let watching = false;
    try {
      // Only retention "0" needs the registration (two writes); otherwise the execution is read.
      const watched = this.dropWhenRead ? await this.store.watch(this.executionId) : await this.unwatched();
      if (!watched) throw this.notFound();
      watching = watched.watching;
      let execution = watched.execution;
      for (let polls = 0; ; ) {
        if (FINAL.includes(execution.status)) return this.settle(execution);
        const remaining = deadline - Date.now();
        if (remaining <= 0) throw new WorkflowResultTimeoutError(this.executionId, execution.status, timeoutMs as number);
        if (!woken) {
          const pause = sleep(Math.min(this.pollMs, remaining));
          wake = pause.wake;
          await pause.done;
          wake = undefined;
        }
        // Postgres is read when an event woke us, when the job is no longer live in Redis, and every
        // POSTGRES_FALLBACK_POLLS polls; the polls in between only ask Redis.
        const read = woken || ++polls % POSTGRES_FALLBACK_POLLS === 0 || (await this.queues.isLive(this.queue, jobId)) !== true;
        woken = false;
        if (read) execution = await this.execution();
      }
    } finally {
      unsubscribe();
      // A failed unwatch leaves the count high: retention cleanup removes such an execution an hour after it finished.
      if (watching) await this.store.unwatch(this.executionId, this.dropWhenRead).catch(() => undefined);
    }
  }

  private async unwatched(): Promise<{ execution: WorkflowExecution; watching: false } | null> {
    const execution = await this.store.get(this.executionId);
    return execution && { execution, watching: false };
  }

  private notFound(): WorkflowNotFoundError {
    return new WorkflowNotFoundError(`execution ${this.executionId} no longer exists (retention may have removed it)`);
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
