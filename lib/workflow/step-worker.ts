import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { LibraryLogger } from '../observability/library-logger';
import { IdempotencyObserver, NoopObserver } from '../observability/idempotency-observer';
import type { Job, Worker } from 'bullmq';
import { StepTimeoutError } from '../errors/step-timeout.error';
import { TransactionAbortedError } from '../errors/transaction-aborted.error';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { loadPeer } from '../utils/optional-peer';
import { JobHandBack } from './hand-back';
import { runStorage } from './run-context';
import { serializeError } from './serialize-error';
import { stepStorage } from './step-context';
import { StepJobData, StepJobResult } from './step-job';
import { CheckpointedExecution, StepOutcome, WorkflowStore } from './storage/workflow.store';
import type { StepCheckpoint, StepContext } from './workflow.interfaces';
import { RegisteredStep, WorkflowRegistry } from './workflow.registry';
import { stepJobId, WorkflowQueues } from './workflow-queues';
import { LongTimer, setLongTimeout } from '../utils/long-timer';
import { StepState, TransactionalSteps } from '../transaction/transactional-steps';
import { isConflict } from '../transaction/transaction-conflicts';
import { settleTask, startTask, taskEndStatus } from '../task/task-run';
import { QueueSettings } from '../queues/queue-settings';

/**
 * Runs step jobs: checks Postgres first (an existing checkpoint is adopted, a cancelled execution runs nothing),
 * calls the real method inside the step context, and checkpoints the outcome once. A failed attempt is retried
 * by BullMQ with the step's backoff; the last failed attempt is checkpointed as a failure.
 */
@Injectable()
export class StepWorker {
  private readonly logger: Logger = new LibraryLogger('Workflows');
  @Optional() @Inject(IdempotencyObserver) private readonly observer: IdempotencyObserver = new NoopObserver();
  private readonly workers: Worker[] = [];
  private readonly handBack: JobHandBack;
  private readonly inFlight = new Set<string>();

  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly registry: WorkflowRegistry,
    private readonly store: WorkflowStore,
    private readonly queues: WorkflowQueues,
    private readonly queueSettings: QueueSettings,
    @Optional() private readonly transactional?: TransactionalSteps,
  ) {
    this.handBack = new JobHandBack(this.logger, options.workflows.pollIntervalMs);
  }

  /** Starts one BullMQ Worker per step queue. */
  start(): void {
    const o = this.options.workflows;
    const { Worker } = loadPeer('bullmq', 'workflows (@Workflow() classes)');
    for (const name of this.registry.stepQueues()) {
      const worker = new Worker<StepJobData, StepJobResult>(name, (job, token) => this.process(name, job, token), {
        connection: this.queues.connection(),
        prefix: this.queues.prefixOf(name),
        ...this.queueSettings.for(name, o.concurrency).worker,
        lockDuration: o.lockDurationMs,
        stalledInterval: o.stalledIntervalMs,
        maxStalledCount: 1,
      });
      worker.on('error', (err) => this.logger.warn(`step worker "${name}": ${err.message}`));
      this.workers.push(worker);
    }
  }

  /** True while every step worker of this instance is running (health checks). */
  workersAlive(): boolean {
    return this.workers.every((w) => w.isRunning());
  }

  /** True while this process runs the step job (its job may have vanished from Redis, the step has not). */
  isRunningHere(queue: string, jobId: string): boolean {
    return this.inFlight.has(`${queue}\u0000${jobId}`);
  }

  /**
   * Waits for running steps to finish and checkpoint, at most `lockDuration`, then closes the workers. A step still
   * running then is left to BullMQ's stalled-job recovery: another instance runs it again (at-least-once).
   */
  async close(): Promise<void> {
    const workers = this.workers.splice(0);
    await Promise.all(workers.map((w) => drainAndClose(w, () => this.inFlight.size === 0, this.options.workflows.lockDurationMs)));
  }

  /**
   * Whether the step may run without reading Postgres first: the first start of a fresh job whose run still holds
   * its workflow job's lock (one Redis read; see `StepJobData.freshLock`). Should that read fail, it reads Postgres.
   */
  private isFreshStart(queue: string, job: Pick<Job<StepJobData, StepJobResult>, 'data' | 'attemptsMade'>): Promise<boolean> {
    const lock = job.data.freshLock;
    return lock !== undefined && isFirstStart(job) ? this.queues.lockHolds(queue, lock) : Promise.resolve(false);
  }

  /** @internal Runs one step job (called by the BullMQ worker, or in-process by the testing module's inline queues). */
  async process(queue: string, job: Pick<Job<StepJobData, StepJobResult>, 'id' | 'data' | 'attemptsMade'>, token?: string): Promise<StepJobResult> {
    const data = job.data;
    const step = this.registry.find(data.owner)?.steps.get(data.step);
    const instance = this.registry.find(data.owner)?.instance;
    if (!step || !instance) return this.handBack.send(job as Job, token, `step "${data.step}" of workflow "${data.owner}"`);
    const jobId = job.id ?? stepJobId(data.executionId, data.position);
    const key = `${queue}\u0000${jobId}`;
    this.inFlight.add(key);
    try {
      const attempt = job.attemptsMade + 1;
      const write = (outcome: StepOutcome) => this.store.checkpoint(data.executionId, data.position, step.name, outcome, attempt, data.argsHash ?? null);
      const run = () => this.observer.stepAttempt({ ...data, stepName: step.name, attempt }, () => this.attempt(step, instance, data, attempt));
      // A @Task(): its execution (or, called from a workflow, its record under the parent) shows it running.
      const isTask = this.registry.find(data.owner)?.task !== undefined;
      let checkpoint: StepCheckpoint | null;
      let execution: CheckpointedExecution | undefined;
      let state: StepState | undefined;
      if (step.transaction && this.transactional) {
        // @Step({ transaction: true }): the state is read in the step's transaction (unless the job is fresh, as
        // below), which runs it and commits its writes with its checkpoint (the explorer checked `transactional` exists)
        if (isTask) await startTask(this.store, data);
        const entry = { executionId: data.executionId, position: data.position, name: step.name, attempts: attempt, argsHash: data.argsHash ?? null };
        const fresh = await this.isFreshStart(queue, job);
        const done = await this.transactional.run(step.transaction.isolation, entry, run, write, fresh).catch(async (err: unknown) => {
          // Aborted for a conflict as many times in a row as TransactionalSteps runs it, or by a failed statement the
          // step caught: this attempt's failure, as any error the step throws — the last one is checkpointed, so the
          // workflow ends instead of losing the job.
          if (!isConflict(err) && !(err instanceof TransactionAbortedError)) throw err;
          return { status: 'running' as const, ...(await write(this.failedAttempt(step, data, attempt, err))) };
        });
        ({ checkpoint, execution } = done);
        state = done;
      } else if (data.task) {
        // An enqueued task: one statement marks it running and reads its state, one writes its outcome and ends it.
        state = await this.store.startTaskAttempt(data.executionId, data.position);
        checkpoint = state.checkpoint;
      } else {
        // A fresh job's first start cannot find a checkpoint (see StepJobData.fresh): its run learns of a cancellation
        // from the previous step's checkpoint. Any other start asks Postgres first.
        state = (await this.isFreshStart(queue, job)) ? undefined : await this.store.stepState(data.executionId, data.position);
        checkpoint = state?.checkpoint ?? null;
      }
      let settled = false;
      if (!checkpoint) {
        if (state && state.status !== 'running' && state.status !== 'pending') {
          this.queues.notify(queue, jobId, { kind: 'finished' });
          return { kind: 'stopped', status: state.status };
        }
        if (data.task && !step.transaction) {
          const outcome = await run();
          let written: boolean;
          ({ written, checkpoint, execution } = await this.store.checkpointTask(data.executionId, data.position, step.name, outcome, attempt, data.argsHash ?? null, taskEndStatus(outcome)));
          settled = written;
        } else {
          if (isTask) await startTask(this.store, data);
          ({ checkpoint, execution } = await write(await run()));
        }
      }
      if (isTask && !settled) await settleTask(this.store, data, checkpoint);
      // The outcome goes to a waiter in this process directly; BullMQ only learns that it is in Postgres.
      this.queues.notify(queue, jobId, { kind: 'checkpoint', checkpoint, execution });
      return { kind: 'checkpointed', position: data.position };
    } finally {
      this.inFlight.delete(key);
    }
  }

  /** One attempt; throws to have BullMQ retry, returns the outcome to checkpoint after the last attempt. */
  private async attempt(step: RegisteredStep, instance: object, data: StepJobData, attempt: number): Promise<StepOutcome> {
    const context: StepContext = {
      executionId: data.executionId,
      workflowId: data.workflowId,
      workflowName: data.workflowName,
      stepName: step.name,
      position: data.position,
      attempt,
      idempotencyKey: `${data.executionId}:${data.position}`,
    };
    try {
      const value = await runStorage.exit(() => stepStorage.run(context, () => this.invoke(step, instance, data.args)));
      let stored: unknown;
      try {
        stored = value === undefined ? null : (JSON.parse(JSON.stringify(value)) as unknown);
      } catch (err) {
        throw new UnrecoverableStepError(`step "${step.name}" returned a value that is not JSON-serializable: ${(err as Error).message}`);
      }
      return { status: 'completed', result: stored };
    } catch (err) {
      // Postgres aborted a transactional step's transaction under its own statement: not the step's failure, and
      // no attempt spent — TransactionalSteps rolls back and runs it again, as after a conflict at its COMMIT.
      if (step.transaction && this.transactional && isConflict(err)) throw err;
      return this.failedAttempt(step, data, attempt, err);
    }
  }

  /** A failed attempt: the outcome to checkpoint after the last one; before it, throws to have BullMQ retry. */
  private failedAttempt(step: RegisteredStep, data: StepJobData, attempt: number, err: unknown): StepOutcome {
    const last = attempt >= step.attempts || (err instanceof Error && err.name === 'UnrecoverableError');
    if (last) return { status: 'failed', error: serializeError(err) };
    // BullMQ keeps a failed attempt's reason in its events stream, beyond retention: give it no user data.
    this.logger.warn(`step "${step.name}" (#${data.position}) of execution ${data.executionId}, attempt ${attempt}: ${(err as Error)?.message ?? String(err)}`);
    throw new Error(`attempt ${attempt} of step "${step.name}" failed (${(err as Error)?.name ?? 'Error'}); it will be retried`);
  }

  private invoke(step: RegisteredStep, instance: object, args: unknown[]): Promise<unknown> {
    const running = Promise.resolve().then(() => step.original.apply(instance, args));
    if (step.timeoutMs === undefined) return running;
    const timeoutMs = step.timeoutMs;
    let timer: LongTimer | undefined;
    // The abandoned attempt keeps running; its late result is dropped here and never checkpointed.
    running.catch(() => undefined);
    return Promise.race([
      running,
      new Promise<never>((_, reject) => {
        timer = setLongTimeout(() => reject(new StepTimeoutError(step.name, timeoutMs)), timeoutMs);
      }),
    ]).finally(() => timer?.clear());
  }
}

/** The first start of a fresh job (BullMQ counts starts; a job started again after a stall or a retry is not). */
function isFirstStart(job: Pick<Job<StepJobData, StepJobResult>, 'data' | 'attemptsMade'> & { attemptsStarted?: number }): boolean {
  return job.data.fresh === true && job.attemptsMade === 0 && job.attemptsStarted === 1;
}

/** BullMQ does not retry an error named `UnrecoverableError` (its own class or not): no bullmq import needed. */
class UnrecoverableStepError extends Error {
  override readonly name = 'UnrecoverableError';
}

/**
 * Stops fetching jobs, waits until `isIdle()` (the jobs in progress here have finished) for at most `graceMs`,
 * then closes the worker without waiting further; a job still running is left to BullMQ's stalled-job recovery.
 */
export async function drainAndClose(worker: Worker, isIdle: () => boolean, graceMs: number): Promise<void> {
  await worker.pause(true).catch(() => undefined);
  const deadline = Date.now() + graceMs;
  while (!isIdle() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  await worker.close(true).catch(() => undefined);
}
