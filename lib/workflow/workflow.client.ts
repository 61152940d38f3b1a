import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { LibraryLogger } from '../observability/library-logger';
import { IdempotencyObserver, NoopObserver } from '../observability/idempotency-observer';
import { WorkflowConflictError } from '../errors/workflow-conflict.error';
import { WorkflowExistsError } from '../errors/workflow-exists.error';
import { WorkflowNotFoundError } from '../errors/workflow-not-found.error';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { canonicalJson } from '../utils/canonical-json';
import { WorkflowStore } from './storage/workflow.store';
import { uuidv7 } from './uuidv7';
import type { ListWorkflowsOptions, StartWorkflowOptions, StepCheckpoint, WorkflowExecution, WorkflowStatus } from './workflow.interfaces';
import { RegisteredWorkflow, WorkflowRegistry } from './workflow.registry';
import { WorkflowHandle } from './workflow-handle';
import { inputHash, resolveWorkflowId } from './workflow-identity';
import { EVENT_CHANNEL, eventSignalKey, stepJobId, workflowJobId, WorkflowQueues } from './workflow-queues';
import { WorkflowWaker } from './workflow-waker';
import { WorkflowFinishedError } from '../errors/workflow-finished.error';
import type { Duration } from '../utils/duration';
import { parseDuration } from '../utils/duration';
import { sleep } from '../utils/long-timer';
import { DEFAULT_TOPIC } from './workflow.constants';
import { WorkflowStartCache } from './workflow-start.cache';
import { addWithin } from './add-within';
import { RegisteredWorkflowRetention } from './workflow-retention';
import { ScheduleRegistrar } from '../schedule/schedule-registrar';
import type { ScheduleInfo, ScheduleWorkflowOptions } from '../schedule/schedule.interfaces';
import { scheduleOptionProblems } from '../schedule/catch-up';
import { ScheduleInvalidError } from '../errors/schedule-invalid.error';

/** A workflow class: an injectable with `run(input)`. */
export type WorkflowClass<W extends { run(input: never): unknown } = { run(input: never): unknown }> = abstract new (...args: never[]) => W;

type InputOf<W> = W extends { run(input: infer I): unknown } ? I : never;
type ResultOf<W> = W extends { run(input: never): infer R } ? Awaited<R> : never;

/** Options of `WorkflowClient.send()`. */
export interface SendOptions {
  /** The topic `recv(topic)` reads. Default: the topic of `recv()` without one. */
  topic?: string;
  /** The same key sent again to the same execution is stored once. */
  idempotencyKey?: string;
}

/** Options of `WorkflowClient.getEvent()`. */
export interface GetEventOptions {
  /** Wait this long for the key to be set. Default 0: read once. */
  timeout?: Duration;
}

const FINAL: readonly WorkflowStatus[] = ['completed', 'failed', 'cancelled', 'timed_out'];

/** Starts, finds, cancels, resumes and inspects durable workflow executions. */
@Injectable()
export class WorkflowClient {
  private readonly logger: Logger = new LibraryLogger('Workflows');
  @Optional() @Inject(IdempotencyObserver) private readonly observer: IdempotencyObserver = new NoopObserver();

  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly registry: WorkflowRegistry,
    private readonly store: WorkflowStore,
    private readonly queues: WorkflowQueues,
    private readonly startCache: WorkflowStartCache,
    private readonly retention: RegisteredWorkflowRetention,
    private readonly waker: WorkflowWaker,
    private readonly schedules: ScheduleRegistrar,
  ) {}

  /**
   * Starts a workflow, or returns the execution that already holds its workflow id: pending or running → that
   * handle; completed → a handle whose `result()` is the stored result. Failed, cancelled and timed-out executions
   * do not hold the id. The same id with a different input throws WorkflowConflictError; `onConflict: 'error'`
   * throws WorkflowExistsError instead of returning an existing execution.
   */
  async start<W extends { run(input: never): unknown }>(
    workflow: WorkflowClass<W> | string,
    input: InputOf<W>,
    options: StartWorkflowOptions = {},
  ): Promise<WorkflowHandle<ResultOf<W>>> {
    const registered = this.registry.get(workflow);
    if (options.onConflict !== undefined && options.onConflict !== 'return-existing' && options.onConflict !== 'error') {
      throw new TypeError(`onConflict must be "return-existing" or "error", got ${JSON.stringify(options.onConflict)}`);
    }
    const canonical = canonicalJson(input);
    const hash = inputHash(registered.name, canonical);
    const workflowId = resolveWorkflowId(registered.name, registered.identity, hash, options.workflowId);
    const cached = options.onConflict === 'error' ? undefined : await this.startCache.completed(workflowId);
    if (cached && cached.execution.workflowName === registered.name && cached.inputHash === hash) {
      return this.handle<ResultOf<W>>(registered, cached.execution);
    }
    const execution = await this.insertOrFind(registered, canonical, hash, workflowId, options.onConflict === 'error');
    return this.handle<ResultOf<W>>(registered, execution);
  }

  /**
   * @internal Starts a child workflow of a running execution (`startChild`), linked to its parent, or returns the
   * execution that already holds the id (a replay or a recovery never starts a second child).
   */
  async startChild(workflow: RegisteredWorkflow, input: unknown, workflowId: string, parentExecutionId: string): Promise<WorkflowExecution> {
    const canonical = canonicalJson(input);
    return this.insertOrFind(workflow, canonical, inputHash(workflow.name, canonical), workflowId, false, parentExecutionId);
  }

  /** Inserts and enqueues a new execution, or returns the one holding the id (after checking it is the same start). */
  private async insertOrFind(
    registered: RegisteredWorkflow,
    canonical: string,
    hash: string,
    workflowId: string,
    conflictIsError: boolean,
    parentExecutionId?: string,
  ): Promise<WorkflowExecution> {
    const executionId = uuidv7();
    const { inserted: insertedNow, execution } = await this.store.insert({
      executionId,
      workflowId,
      workflowName: registered.name,
      input: JSON.parse(canonical) as unknown,
      inputHash: hash,
      timeoutMs: registered.timeoutMs,
      ...(parentExecutionId === undefined ? {} : { parentExecutionId }),
    });
    // A retried insert whose first attempt committed (the reply was lost) reads back its own row.
    const inserted = insertedNow || execution.executionId === executionId;
    if (!inserted) {
      const stored = execution;
      if (stored.workflowName !== registered.name) {
        throw new WorkflowConflictError(workflowId, execution.executionId, `of another workflow ("${stored.workflowName}")`);
      }
      if (stored.inputHash !== hash) throw new WorkflowConflictError(workflowId, execution.executionId, 'with a different input');
      if (conflictIsError) throw new WorkflowExistsError(workflowId, execution.executionId, execution.status);
      await this.startCache.remember(execution, hash, this.retention.retentionOf(registered));
      return execution;
    }
    await this.enqueue(registered, execution.executionId);
    return execution;
  }

  /** The handle of the newest execution of a workflow id (the live or completed one when there is one). */
  async getHandle<R = unknown>(workflowId: string): Promise<WorkflowHandle<R>> {
    const execution = await this.latestWorkflow(workflowId);
    return this.handle<R>(this.registry.find(execution.workflowName), execution);
  }

  /**
   * Cancels the live execution of a workflow id: a running step finishes (and is checkpointed), no further step
   * starts, the status becomes cancelled. Returns false when there was nothing live to cancel.
   */
  async cancel(workflowId: string): Promise<boolean> {
    await this.latestWorkflow(workflowId);
    // The kind filter: a task that took the id since (after this workflow failed) is not this client's to cancel.
    const execution = await this.store.cancel(workflowId, 'workflow');
    if (!execution) return false;
    const workflow = this.registry.find(execution.workflowName);
    if (workflow) {
      // A run that has not started yet need not start at all; an active one stops before its next step.
      await this.queues.queue(workflow.queue).remove(workflowJobId(execution.executionId)).catch(() => undefined);
      this.queues.notify(workflow.queue, workflowJobId(execution.executionId), { kind: 'check' });
    }
    // Its unfinished children were cancelled with it; a parent waiting for this child learns of it now.
    if (execution.parentExecutionId) await this.waker.wakeParent(execution.parentExecutionId);
    return true;
  }

  /**
   * Resumes the newest failed or cancelled execution of a workflow id from its checkpoints: completed steps are kept;
   * the failures that ended it and those its run never received run again, failures the workflow caught stay (README
   * "Resume and caught failures"). Returns the handle; a live or completed execution is returned as it is. Throws
   * WorkflowExistsError when a newer execution holds the workflow id.
   */
  async resume<R = unknown>(workflowId: string): Promise<WorkflowHandle<R>> {
    const latest = await this.latestWorkflow(workflowId);
    if (latest.status !== 'failed' && latest.status !== 'cancelled') {
      if (latest.status === 'timed_out') throw new WorkflowNotFoundError(`execution ${latest.executionId} timed out; start a new one instead`);
      return this.handle<R>(this.registry.find(latest.workflowName), latest);
    }
    const workflow = this.registry.get(latest.workflowName);
    let resumed: Awaited<ReturnType<WorkflowStore['resume']>>;
    try {
      resumed = await this.store.resume(latest.executionId);
    } catch (err) {
      if ((err as { code?: string }).code === '23505') {
        const holder = await this.store.latest(workflowId);
        throw new WorkflowExistsError(workflowId, holder?.executionId ?? 'unknown', holder?.status ?? 'unknown');
      }
      throw err;
    }
    if (!resumed) return this.resume<R>(workflowId); // changed meanwhile: look again
    for (const failed of resumed.retried) {
      const step = workflow.steps.get(failed.name);
      if (step) await this.queues.queue(step.queue).remove(stepJobId(latest.executionId, failed.position)).catch(() => undefined);
    }
    await this.queues.queue(workflow.queue).remove(workflowJobId(latest.executionId)).catch(() => undefined);
    await this.enqueue(workflow, latest.executionId);
    return this.handle<R>(workflow, resumed.execution);
  }

  /**
   * Sends a message to the live execution of a workflow id, for its `recv(topic)`: stored durably in Postgres, then
   * the workflow is woken. With an `idempotencyKey`, the same key sent again is stored once (and a retry after the
   * workflow consumed it and finished is accepted silently). Throws WorkflowNotFoundError for an unknown workflow id
   * and WorkflowFinishedError when its newest execution has finished.
   */
  async send(workflowId: string, message: unknown, options: SendOptions = {}): Promise<void> {
    if (options.idempotencyKey !== undefined && (typeof options.idempotencyKey !== 'string' || options.idempotencyKey.length === 0)) {
      throw new TypeError('send(…, { idempotencyKey }): the key must be a non-empty string');
    }
    const json = JSON.stringify(message);
    const sent = await this.store.send(workflowId, options.topic ?? DEFAULT_TOPIC, json === undefined ? null : JSON.parse(json), options.idempotencyKey ?? null);
    if (!sent) throw new WorkflowNotFoundError(`no execution has workflow id "${workflowId}": start it before sending to it`);
    const { execution } = sent;
    if (FINAL.includes(execution.status)) {
      if (sent.duplicate) return;
      throw new WorkflowFinishedError(workflowId, execution.executionId, execution.status);
    }
    await this.waker.wake(execution);
  }

  /**
   * The latest value a workflow published with `setEvent(key, …)`, waiting up to `timeout` for it to be set; null
   * after the timeout, or at once when the execution has finished without setting it. Reads the newest execution of
   * the workflow id. Throws WorkflowNotFoundError for an unknown workflow id.
   */
  async getEvent<T = unknown>(workflowId: string, key: string, options: GetEventOptions = {}): Promise<T | null> {
    const timeoutMs = options.timeout === undefined ? 0 : parseDuration(options.timeout);
    if (typeof timeoutMs === 'object') throw new TypeError(`getEvent({ timeout }): ${timeoutMs.error}`);
    const deadline = Date.now() + timeoutMs;
    let signalled = false;
    let wake: (() => void) | undefined;
    let unsubscribe: (() => void) | undefined;
    try {
      for (;;) {
        const read = await this.store.getEvent(workflowId, key);
        if (!read) throw new WorkflowNotFoundError(`no execution has workflow id "${workflowId}"`);
        if (read.found) return read.value as T;
        const remaining = deadline - Date.now();
        if (remaining <= 0 || FINAL.includes(read.execution.status)) return null;
        if (!unsubscribe) {
          // Listen, then read once more: a value set in between is not missed.
          unsubscribe = this.queues.wait(EVENT_CHANNEL, eventSignalKey(read.execution.executionId, key), () => {
            signalled = true;
            wake?.();
          });
          continue;
        }
        if (!signalled) {
          const pause = sleep(Math.min(this.options.workflows.pollIntervalMs, remaining));
          wake = pause.wake;
          await pause.done;
          wake = undefined;
        }
        signalled = false;
      }
    } finally {
      unsubscribe?.();
    }
  }

  /**
   * Runs a workflow on a cron schedule from now on, or replaces the schedule of that name (default: the workflow's
   * name). Each occurrence starts with id `<name>@<scheduled time ISO>` and input `{ scheduledAt }`; the schedule is
   * stored in Postgres, so it survives restarts and missed occurrences follow `catchUp`. Throws ScheduleInvalidError.
   */
  async schedule(workflow: WorkflowClass | string, cron: string, options: ScheduleWorkflowOptions = {}): Promise<ScheduleInfo> {
    const registered = this.registry.get(workflow);
    const name = options.name ?? registered.name;
    const problems = scheduleOptionProblems(options, ['name', 'timezone', 'catchUp']);
    if (problems.length > 0) throw new ScheduleInvalidError(name, problems);
    return this.schedules.schedule({
      name,
      kind: 'workflow',
      target: registered.name,
      cron,
      ...(options.timezone === undefined ? {} : { timezone: options.timezone }),
      catchUp: options.catchUp ?? 'latest',
      source: 'runtime',
    });
  }

  /** A schedule by name (from a decorator or added at runtime) with its next occurrence and that occurrence's workflow id; undefined when there is none. */
  async getSchedule(name: string): Promise<ScheduleInfo | undefined> {
    return this.schedules.get(name);
  }

  /** Removes a schedule by name (its stored row and BullMQ job scheduler); false when there was none. Started occurrences keep running. */
  async unschedule(name: string): Promise<boolean> {
    return this.schedules.unschedule(name);
  }

  /** Executions, newest first, filtered by status and workflow. */
  async list(options: ListWorkflowsOptions = {}): Promise<WorkflowExecution[]> {
    const workflow = options.workflow === undefined ? undefined : typeof options.workflow === 'string' ? options.workflow : this.registry.get(options.workflow).name;
    return this.store.list({ ...options, workflow });
  }

  /** The step checkpoints of an execution, in position order. */
  async steps(executionId: string): Promise<StepCheckpoint[]> {
    return this.store.steps(executionId);
  }

  /**
   * The newest execution of a workflow id. A task's id (tasks share the id space) is refused like an unknown one,
   * naming TaskClient: its job is a step job on its own queue, which this client's cancel and resume do not know.
   */
  private async latestWorkflow(workflowId: string): Promise<WorkflowExecution> {
    const latest = await this.store.latest(workflowId);
    if (!latest) throw new WorkflowNotFoundError(`no execution has workflow id "${workflowId}"`);
    if (latest.kind === 'task') {
      throw new WorkflowNotFoundError(`"${workflowId}" is the id of a task (${latest.workflowName}), not of a workflow: use TaskClient.getTask() or cancel() for it`);
    }
    return latest;
  }

  /** Adds the execution's job, waiting for Redis at most ADD_WAIT_MS (see addWithin). */
  private async enqueue(workflow: RegisteredWorkflow, executionId: string): Promise<void> {
    const jobId = workflowJobId(executionId);
    const adding = Promise.resolve().then(() =>
      this.queues.queue(workflow.queue).add(workflow.name, { executionId, trace: this.observer.carrier() }, { jobId, removeOnComplete: true, removeOnFail: true }));
    await addWithin(adding, (err) => {
      this.logger.warn(`execution ${executionId} was stored but not enqueued (${err.message}); the reconciler will enqueue it`);
    });
  }

  private handle<R>(workflow: RegisteredWorkflow | undefined, execution: WorkflowExecution): WorkflowHandle<R> {
    return new WorkflowHandle<R>(
      execution.workflowId,
      execution.executionId,
      workflow?.queue ?? 'workflows',
      this.store,
      this.queues,
      this.options.workflows.pollIntervalMs,
      workflow !== undefined && this.retention.retentionOf(workflow) === 0,
    );
  }
}
