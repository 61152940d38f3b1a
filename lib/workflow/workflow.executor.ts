import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { LibraryLogger } from '../observability/library-logger';
import { IdempotencyObserver, NoopObserver } from '../observability/idempotency-observer';
import type { Queue } from 'bullmq';
import { DeterminismError } from '../errors/determinism.error';
import { verifyRecorded, waitAsRecorded } from './journal-verify';
import { StepFailedError } from '../errors/step-failed.error';
import { WorkflowCancelledError } from '../errors/workflow-cancelled.error';
import { WorkflowNotFoundError } from '../errors/workflow-not-found.error';
import { WorkflowTimeoutError } from '../errors/workflow-timeout.error';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { RunContext, runStorage, RunStopped, stopRun } from './run-context';
import { RunJournal } from './run-journal';
import { nudgeWaits, produceOutcome } from './run-waits';
import { WorkflowWaker } from './workflow-waker';
import { DurableCalls } from './durable-calls';
import { stepArgsHash } from './step-args-hash';
import { serializeError } from './serialize-error';
import { stepStorage } from './step-context';
import { RunLock, StepJobData } from './step-job';
import { StepWorker } from './step-worker';
import { CheckpointedExecution, RecordedStep, RegisteredWait, RunEnd, WorkflowStore } from './storage/workflow.store';
import type { StepCheckpoint } from './workflow.interfaces';
import { RegisteredStep, WorkflowRegistry } from './workflow.registry';
import { JobSignal, LIVE_JOB_STATES, POSTGRES_FALLBACK_POLLS, stepJobId, wakeJobKey, workflowJobId, WorkflowQueues } from './workflow-queues';
import { RegisteredWorkflowRetention } from './workflow-retention';
import { LongTimer, setLongTimeout } from '../utils/long-timer';

/**
 * How an execution's run ended in this process: finished, released (run it again now), or suspended until a time
 * (ms since the epoch; Infinity: until a message or a child wakes it).
 */
export type RunOutcome = 'finished' | 'released' | { suspendedUntil: number };

/**
 * Runs and replays workflow functions. Each step call gets the next position from the run's journal; a stored
 * checkpoint answers it (after checking the stored name and argument hash), otherwise the step job is added and its
 * checkpoint awaited: from the step worker in this process, from BullMQ events, and by polling Postgres and the job,
 * so a vanished job is re-added. The journal hands outcomes to the workflow code in their recorded order.
 */
@Injectable()
export class WorkflowExecutor {
  private readonly logger: Logger = new LibraryLogger('Workflows');
  @Optional() @Inject(IdempotencyObserver) private readonly observer: IdempotencyObserver = new NoopObserver();
  private readonly active = new Set<RunContext>();

  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly registry: WorkflowRegistry,
    private readonly store: WorkflowStore,
    private readonly queues: WorkflowQueues,
    private readonly steps: StepWorker,
    private readonly retention: RegisteredWorkflowRetention,
    private readonly waker: WorkflowWaker,
    private readonly calls: DurableCalls,
  ) {}

  /** Called by a wrapped `@Step()` method: a durable step inside a run, a plain call anywhere else. */
  callStep(step: RegisteredStep, thisArg: unknown, args: unknown[]): Promise<unknown> {
    const run = runStorage.getStore();
    if (!run || stepStorage.getStore()) return Promise.resolve().then(() => step.original.apply(thisArg, args));
    return this.durableStep(run, step, args);
  }

  /** Runs (or replays) an execution; called by the workflow worker, with the lock of the job it runs for. */
  async execute(executionId: string, lock?: RunLock): Promise<RunOutcome> {
    const o = this.options.workflows;
    const begun = await this.store.begin(executionId, o.maxRecoveryAttempts);
    if (begun.kind === 'skip') {
      this.notifyFinished(begun.execution?.workflowName, executionId);
      return 'finished';
    }
    const { execution } = begun;
    const workflow = this.registry.find(execution.workflowName);
    if (!workflow) {
      await this.store.release(executionId);
      throw new WorkflowNotFoundError(`workflow "${execution.workflowName}" is not registered in this instance`);
    }
    const run: RunContext = {
      execution, workflow, journal: this.journal(executionId, begun.recorded, () => run), abort: new AbortController(), calls: this.calls, busy: 0, waits: new Map(), registeredWaits: begun.waits ?? new Map<number, RegisteredWait>(),
      fresh: begun.firstRun === true && lock !== undefined,
      ...(lock ? { lock } : {}),
    };
    this.active.add(run);
    // A message sent, or a child finished, in this process: the run's waits check again at once.
    const unsubscribe = this.queues.wait(workflow.queue, wakeJobKey(executionId), () => nudgeWaits(run));
    let timer: LongTimer | undefined;
    let outcome: RunOutcome = 'finished';
    try {
      const deadline = execution.deadlineAt?.getTime();
      const body = runStorage.run(run, () => Promise.resolve().then(() => workflow.instance.run(execution.input)));
      // What the function received up to its end is what resume() judges by: nothing is delivered after it settles.
      body.then(() => run.journal.close(), () => run.journal.close());
      const stopped = new Promise<never>((_, reject) => {
        run.abort.signal.addEventListener('abort', () => reject(run.stopped ?? new RunStopped('finished')), { once: true });
        if (deadline !== undefined) {
          timer = setLongTimeout(() => stopRun(run, new RunStopped('timed_out')), deadline - Date.now());
        }
      });
      body.catch(() => undefined);
      const result = await Promise.race([body, stopped]);
      if (run.stopped) throw run.stopped;
      await this.store.finish(executionId, 'completed', { result: result === undefined ? null : result });
      return outcome;
    } catch (err) {
      return (outcome = await this.settleFailure(run, err));
    } finally {
      timer?.clear();
      unsubscribe();
      stopRun(run, new RunStopped('finished'));
      this.active.delete(run);
      this.notifyFinished(workflow.name, executionId);
      // A child that ended wakes its parent, which waits for its result.
      if (outcome === 'finished' && execution.parentExecutionId) await this.waker.wakeParent(execution.parentExecutionId);
      if (this.retention.retentionOf(workflow) === 0) await this.dropFinished(executionId);
    }
  }

  /** Stops every run in this process (graceful shutdown); their executions go back to pending. */
  abortAll(): void {
    for (const run of this.active) stopRun(run, new RunStopped('shutdown'));
  }

  private async settleFailure(run: RunContext, err: unknown): Promise<RunOutcome> {
    const id = run.execution.executionId;
    const stop = run.stopped ?? (err instanceof RunStopped ? err : undefined);
    switch (stop?.reason) {
      case 'shutdown':
        await this.store.release(id).catch(() => undefined);
        return 'released';
      case 'cancelled':
        await this.store.recordRunEnd(id, this.runEnd(run)).catch((e: Error) => {
          this.logger.warn(`execution ${id}: could not record what its cancelled run received (${e.message}); resume() re-runs its last failure only`);
        });
        return 'finished';
      case 'finished':
        return 'finished';
      case 'suspended': {
        // Every pending call of the run waits (sleep, recv, a child): the job is delayed, no worker slot is held.
        const until = stop.until ?? Infinity;
        const suspended = await this.store.suspend(id, until);
        if (suspended === 'suspended') return { suspendedUntil: until };
        if (suspended === 'stopped') return 'finished';
        // A message or a child arrived since the run began: run again now.
        await this.store.release(id);
        return 'released';
      }
      case 'timed_out':
        await this.store.finish(id, 'timed_out', { error: serializeError(new WorkflowTimeoutError(id)) });
        return 'finished';
      case 'nondeterministic':
        await this.store.finish(id, 'failed', { error: serializeError(stop.error), end: this.runEnd(run) });
        return 'finished';
      case 'infrastructure':
        // Postgres or Redis stayed unreachable: leave the status alone; the job fails and is recovered later.
        throw stop.error;
      default:
        await this.store.finish(id, 'failed', { error: serializeError(err), end: this.runEnd(run, err) });
        return 'finished';
    }
  }

  /** What the run received, and which of its step failures its error carries: resume() re-runs those and the unreceived. */
  private runEnd(run: RunContext, err?: unknown): RunEnd {
    return { deliveredThrough: run.journal.deliveredThrough, endedBy: err === undefined ? [] : run.journal.endedBy(err) };
  }

  private journal(executionId: string, recorded: RecordedStep[], run: () => RunContext): RunJournal {
    return new RunJournal(recorded, {
      fetch: (from, to) => this.store.recordedBetween(executionId, from, to),
      stalled: (due) => {
        const error = new DeterminismError(executionId, due.position, due.name, due.name, { notCalled: true });
        stopRun(run(), new RunStopped('nondeterministic', error));
      },
      failed: (err) => stopRun(run(), new RunStopped('infrastructure', err)),
    }, this.options.workflows.lockDurationMs);
  }

  /** Retention "0": a finished execution goes at once (an execution handed back to pending stays). */
  private async dropFinished(executionId: string): Promise<void> {
    await this.store.removeFinished(executionId).catch((err: Error) => {
      this.logger.warn(`could not remove finished execution ${executionId} (retention 0); cleanup will: ${err.message}`);
    });
  }

  private notifyFinished(workflowName: string | undefined, executionId: string): void {
    const workflow = workflowName ? this.registry.find(workflowName) : undefined;
    if (workflow) this.queues.notify(workflow.queue, workflowJobId(executionId), { kind: 'check' });
  }

  private async durableStep(run: RunContext, step: RegisteredStep, args: unknown[]): Promise<unknown> {
    if (run.stopped) throw run.stopped;
    const argsHash = stepArgsHash(args);
    const { position, recorded, outcome } = run.journal.call();
    if (recorded) verifyRecorded(run, position, step.name, argsHash, recorded);
    // A sleep or recv registered at this position that has not fired: the code called a step where it waited.
    const wait = run.registeredWaits.get(position);
    if (!recorded && wait) verifyRecorded(run, position, step.name, argsHash, waitAsRecorded(position, wait));
    if (recorded?.status !== 'completed' && recorded?.status !== 'failed') void this.follow(run, step, position, args, argsHash);
    return this.answer(run, step, position, argsHash, await outcome);
  }

  /** Runs (or waits for) the step's job and hands its checkpoint to the journal, which delivers it in its turn. */
  private follow(run: RunContext, step: RegisteredStep, position: number, args: unknown[], argsHash: string): Promise<void> {
    return produceOutcome(run, async () => {
      const checkpoint = await this.awaitStep(run, step, position, args, argsHash);
      // A checkpoint without its number (from a step worker of an older version) is read again from Postgres.
      if (typeof checkpoint.sequence !== 'number') return (await this.store.stepState(run.execution.executionId, position)).checkpoint ?? checkpoint;
      return checkpoint;
    });
  }

  /** The stored outcome as the step call's outcome: its result, or its final error thrown again. */
  private answer(run: RunContext, step: RegisteredStep, position: number, argsHash: string, checkpoint: StepCheckpoint): unknown {
    verifyRecorded(run, position, step.name, argsHash, checkpoint);
    if (checkpoint.status === 'failed') {
      const error = new StepFailedError(step.name, position, checkpoint.attempts, checkpoint.error ?? { name: 'Error', message: 'unknown error' });
      run.journal.noteFailure(error, position);
      throw error;
    }
    return checkpoint.result;
  }

  /**
   * Adds the step job and waits for its checkpoint. Events wake the wait: the checkpoint itself from a step worker in
   * this process, "finished" from another (then Postgres is read once). Between events, each poll asks Redis whether
   * the job is still live; Postgres is read only when it is not (or Redis cannot tell) and every
   * POSTGRES_FALLBACK_POLLS polls, so a waiting step costs Postgres nothing while its job runs.
   */
  private async awaitStep(run: RunContext, step: RegisteredStep, position: number, args: unknown[], argsHash: string): Promise<StepCheckpoint> {
    const { execution } = run;
    const jobId = stepJobId(execution.executionId, position);
    const queue = this.queues.queue(step.queue);
    const data: StepJobData = {
      executionId: execution.executionId,
      workflowId: execution.workflowId,
      workflowName: execution.workflowName,
      owner: step.owner,
      step: step.name,
      position,
      args,
      argsHash,
      trace: this.observer.carrier(),
      ...(run.fresh && run.lock ? { fresh: true, freshLock: run.lock } : {}),
    };
    let signal: JobSignal | undefined;
    let wake: (() => void) | undefined;
    const unsubscribe = this.queues.wait(step.queue, jobId, (s) => {
      // A checkpoint is never overwritten by a later, vaguer signal.
      if (signal?.kind !== 'checkpoint') signal = s;
      wake?.();
    });
    const onAbort = () => wake?.();
    run.abort.signal.addEventListener('abort', onAbort);
    try {
      let added = await this.addStepJob(queue, step, jobId, data);
      let readds = 0;
      let polls = 0;
      for (;;) {
        if (!signal && !run.stopped) {
          await new Promise<void>((resolve) => {
            const timer = setLongTimeout(resolve, this.options.workflows.pollIntervalMs);
            wake = () => {
              timer.clear();
              resolve();
            };
          });
          wake = undefined;
        }
        if (run.stopped) throw run.stopped;
        const heard = signal;
        signal = undefined;
        if (heard?.kind === 'checkpoint') return this.checkpointHeard(run, heard.checkpoint, heard.execution);
        const fallback = heard === undefined && ++polls % POSTGRES_FALLBACK_POLLS === 0;
        if (added && heard?.kind !== 'finished' && !fallback) {
          if (this.steps.isRunningHere(step.queue, jobId) || (await this.queues.isLive(step.queue, jobId))) continue;
        }
        // Postgres decides whether the step ran; the job only tells whether someone is still on it.
        const state = await this.store.stepState(execution.executionId, position);
        if (state.checkpoint) return state.checkpoint;
        if (state.status === 'cancelled') {
          const stop = new RunStopped('cancelled', new WorkflowCancelledError(execution.executionId));
          stopRun(run, stop);
          throw stop;
        }
        if (state.status !== 'running' && state.status !== 'pending') {
          const stop = new RunStopped(state.status === 'timed_out' ? 'timed_out' : 'finished');
          stopRun(run, stop);
          throw stop;
        }
        if (!added) {
          added = await this.addStepJob(queue, step, jobId, data);
          continue;
        }
        const jobState = await queue.getJobState(jobId).catch(() => 'unreachable');
        if (jobState === 'unreachable' || LIVE_JOB_STATES.has(jobState) || this.steps.isRunningHere(step.queue, jobId)) continue;
        // The job is gone (Redis flushed, job failed without a checkpoint): add it again, a bounded number of times.
        // A job added again is never fresh: the lost one may have run.
        delete data.fresh;
        if (++readds > this.options.workflows.maxRecoveryAttempts) {
          const lost = new Error(`the job of step "${step.name}" (#${position}) was lost ${readds - 1} times`);
          lost.name = 'StepJobLostError';
          const { checkpoint } = await this.store.checkpoint(execution.executionId, position, step.name, { status: 'failed', error: serializeError(lost) }, 0, argsHash);
          return checkpoint;
        }
        if (jobState !== 'unknown') await queue.remove(jobId).catch(() => undefined);
        this.logger.warn(`step job ${jobId} (${step.name}) was ${jobState === 'unknown' ? 'missing' : jobState} without a checkpoint; adding it again`);
        added = await this.addStepJob(queue, step, jobId, data);
      }
    } finally {
      unsubscribe();
      run.abort.signal.removeEventListener('abort', onAbort);
    }
  }

  /**
   * A checkpoint handed over by the step worker, with the execution as its write saw it. Another run of the execution
   * (a recovery) makes this run's later step jobs read Postgres before they start; a cancelled or finished execution
   * stops the run here, so that no further step is added (the step worker does not read before a fresh job).
   */
  private checkpointHeard(run: RunContext, checkpoint: StepCheckpoint, execution: CheckpointedExecution | undefined): StepCheckpoint {
    if (!execution) {
      run.fresh = false; // a step worker of an older version: no news of the execution
      return checkpoint;
    }
    if (execution.recoveryAttempts !== run.execution.recoveryAttempts) run.fresh = false;
    if (execution.status === 'running' || execution.status === 'pending') return checkpoint;
    const stop = execution.status === 'cancelled'
      ? new RunStopped('cancelled', new WorkflowCancelledError(run.execution.executionId))
      : new RunStopped(execution.status === 'timed_out' ? 'timed_out' : 'finished');
    stopRun(run, stop);
    throw stop;
  }

  private async addStepJob(queue: Queue, step: RegisteredStep, jobId: string, data: StepJobData): Promise<boolean> {
    try {
      await queue.add(step.name, data, {
        jobId,
        attempts: step.attempts,
        ...(step.backoff === undefined ? {} : { backoff: step.backoff }),
        removeOnComplete: true,
        removeOnFail: true,
      });
      return true;
    } catch (err) {
      // Redis unreachable: the poll loop keeps checking Postgres and adds the job once Redis is back.
      this.logger.warn(`could not add step job ${jobId}: ${(err as Error).message}`);
      return false;
    }
  }
}
