import { Inject, Injectable, Logger } from '@nestjs/common';
import { LibraryLogger } from '../observability/library-logger';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { UnfinishedExecution, WorkflowStore } from './storage/workflow.store';
import { WorkflowRegistry } from './workflow.registry';
import { LIVE_JOB_STATES, WAKE_ON_SIGNAL_DELAY_MS, workflowJobId, WorkflowQueues } from './workflow-queues';
import { WAKE_EARLY_MS } from './run-waits';
import { WorkflowWaker } from './workflow-waker';
import { LongTimer, setLongInterval } from '../utils/long-timer';

const BATCH = 500;

/**
 * How long the reconciler's lock outlives an instance killed during a pass: two intervals, so that the next pass of
 * another instance is late by about one interval, never less than 10 s (the lock is renewed every third of it, and a
 * renewal may miss while Postgres restarts) nor more than 60 s (a long interval needs no longer lease).
 */
export function reconcilerLeaseMs(recoveryIntervalMs: number): number {
  return Math.min(60_000, Math.max(10_000, 2 * recoveryIntervalMs));
}

/**
 * Keeps Postgres and BullMQ in step, on one instance at a time (a lease row in Postgres): re-enqueues unfinished
 * executions that have no live workflow job (Redis flushed, job lost), counting each as a recovery so that a
 * workflow that keeps crashing ends as failed; times out executions past their deadline; deletes expired ones.
 */
@Injectable()
export class WorkflowReconciler {
  private readonly logger: Logger = new LibraryLogger('Workflows');
  private timer?: LongTimer;
  private running?: Promise<void>;

  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly registry: WorkflowRegistry,
    private readonly store: WorkflowStore,
    private readonly queues: WorkflowQueues,
    private readonly waker: WorkflowWaker,
  ) {}

  /** Runs a pass now and then every `recoveryInterval`. */
  start(): void {
    this.tick();
    this.timer = setLongInterval(() => this.tick(), this.options.workflows.recoveryIntervalMs, { unref: true });
  }

  /** Stops the timer and waits for a pass in progress. */
  async stop(): Promise<void> {
    this.timer?.clear();
    this.timer = undefined;
    await this.running;
  }

  /** One pass; returns how many executions were re-enqueued (0 when another instance holds the lock). */
  async reconcile(): Promise<number> {
    let requeued = 0;
    await this.store.withReconcilerLock(async () => {
      const timedOut = await this.store.timeOutExpired();
      if (timedOut.length > 0) this.logger.warn(`${timedOut.length} execution(s) timed out`);
      // A parent waiting for a child that timed out learns of it now.
      for (const id of timedOut) {
        const parent = (await this.store.get(id))?.parentExecutionId;
        if (parent) await this.waker.wakeParent(parent);
      }
      // Every unfinished execution is looked at on each pass (a keyset scan in batches), so many long-running
      // ones with live jobs never hide a newer one whose job was lost.
      for (let after: UnfinishedExecution | undefined, batch: UnfinishedExecution[] = []; ; after = batch[batch.length - 1]) {
        batch = await this.store.unfinished(this.options.workflows.recoveryIntervalMs, BATCH, after);
        requeued += await this.requeueLost(batch);
        if (batch.length < BATCH) break;
      }
      if (requeued > 0) this.logger.warn(`re-enqueued ${requeued} unfinished execution(s) that had no live job`);
    }, reconcilerLeaseMs(this.options.workflows.recoveryIntervalMs));
    return requeued;
  }

  /** Re-enqueues the executions of a batch that have no live workflow job; returns how many. */
  private async requeueLost(unfinished: UnfinishedExecution[]): Promise<number> {
    let requeued = 0;
    // The usual answer, a live job, is read for the whole batch at once (one pipelined round of reads, not one
    // round trip per execution: thousands of sleeping workflows are all unfinished); anything else is read again
    // right before it is acted on.
    const workflows = unfinished.map((execution) => this.registry.find(execution.workflowName));
    const firstLook = await Promise.all(unfinished.map((execution, i) => {
      const workflow = workflows[i];
      return workflow ? this.queues.queue(workflow.queue).getJobState(workflowJobId(execution.executionId)) : Promise.resolve(undefined);
    }));
    for (const [i, execution] of unfinished.entries()) {
      const workflow = workflows[i];
      if (!workflow) continue; // another application's workflow
      const queue = this.queues.queue(workflow.queue);
      const jobId = workflowJobId(execution.executionId);
      const suspended = execution.status === 'pending' && execution.suspendedUntil !== null && execution.suspendedUntil !== undefined;
      const due = suspended && (execution.wakeRequested === true || (execution.suspendedUntil as number) <= Date.now());
      if (LIVE_JOB_STATES.has(firstLook[i] as string) && !(firstLook[i] === 'delayed' && due)) continue;
      const state = await queue.getJobState(jobId);
      // A wake that did not reach Redis (a message, a child, a lost promotion): make the delayed run due.
      if (state === 'delayed' && due) await this.queues.wakeRun(workflow.queue, workflow.name, execution.executionId);
      if (LIVE_JOB_STATES.has(state)) continue;
      if (state !== 'unknown') await queue.remove(jobId);
      // A @Task() execution: its own rules (lib/task) re-add its job or settle it.
      if (workflow.task) {
        if (await workflow.task.recover(execution.executionId)) requeued++;
        continue;
      }
      if (suspended) {
        // Its job was lost (Redis flushed) while it waited: no crash, so no recovery counted; it wakes at its stored time.
        const until = execution.suspendedUntil as number;
        const delay = due ? 0 : until === Infinity ? WAKE_ON_SIGNAL_DELAY_MS : Math.max(0, until - WAKE_EARLY_MS - Date.now());
        await queue.add(workflow.name, { executionId: execution.executionId }, { jobId, delay, removeOnComplete: true, removeOnFail: true });
        requeued++;
        continue;
      }
      if (!(await this.store.countRecovery(execution.executionId, this.options.workflows.maxRecoveryAttempts))) {
        this.logger.warn(`execution ${execution.executionId} (${workflow.name}) failed: recovery attempts exhausted`);
        continue;
      }
      await queue.add(workflow.name, { executionId: execution.executionId }, { jobId, removeOnComplete: true, removeOnFail: true });
      requeued++;
    }
    return requeued;
  }

  private tick(): void {
    if (this.running) return;
    this.running = this.reconcile()
      .then(() => undefined, (err: Error) => this.logger.warn(`reconciler pass failed: ${err.message}`))
      .finally(() => {
        this.running = undefined;
      });
  }
}
