import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { IdempotencyObserver, NoopObserver } from '../observability/idempotency-observer';
import { WorkflowConflictError } from '../errors/workflow-conflict.error';
import { WorkflowExistsError } from '../errors/workflow-exists.error';
import { WorkflowNotFoundError } from '../errors/workflow-not-found.error';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { canonicalJson } from '../utils/canonical-json';
import { WorkflowStore } from './storage/workflow.store';
import { uuidv7 } from './uuidv7';
import type { ListWorkflowsOptions, StartWorkflowOptions, StepCheckpoint, WorkflowExecution } from './workflow.interfaces';
import { RegisteredWorkflow, WorkflowRegistry } from './workflow.registry';
import { WorkflowHandle } from './workflow-handle';
import { inputHash, resolveWorkflowId } from './workflow-identity';
import { stepJobId, workflowJobId, WorkflowQueues } from './workflow-queues';
import { WorkflowStartCache } from './workflow-start.cache';
import { RegisteredWorkflowRetention } from './workflow-retention';

/** A workflow class: an injectable with `run(input)`. */
export type WorkflowClass<W extends { run(input: never): unknown } = { run(input: never): unknown }> = abstract new (...args: never[]) => W;

type InputOf<W> = W extends { run(input: infer I): unknown } ? I : never;
type ResultOf<W> = W extends { run(input: never): infer R } ? Awaited<R> : never;

/** Starts, finds, cancels, resumes and inspects durable workflow executions. */
@Injectable()
export class WorkflowClient {
  private readonly logger = new Logger('Workflows');
  @Optional() @Inject(IdempotencyObserver) private readonly observer: IdempotencyObserver = new NoopObserver();

  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly registry: WorkflowRegistry,
    private readonly store: WorkflowStore,
    private readonly queues: WorkflowQueues,
    private readonly startCache: WorkflowStartCache,
    private readonly retention: RegisteredWorkflowRetention,
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
    const executionId = uuidv7();
    const { inserted: insertedNow, execution } = await this.store.insert({
      executionId,
      workflowId,
      workflowName: registered.name,
      input: JSON.parse(canonical) as unknown,
      inputHash: hash,
      timeoutMs: registered.timeoutMs,
    });
    // A retried insert whose first attempt committed (the reply was lost) reads back its own row.
    const inserted = insertedNow || execution.executionId === executionId;
    if (!inserted) {
      const stored = execution;
      if (stored.workflowName !== registered.name) {
        throw new WorkflowConflictError(workflowId, execution.executionId, `of another workflow ("${stored.workflowName}")`);
      }
      if (stored.inputHash !== hash) throw new WorkflowConflictError(workflowId, execution.executionId, 'with a different input');
      if (options.onConflict === 'error') throw new WorkflowExistsError(workflowId, execution.executionId, execution.status);
      await this.startCache.remember(execution, hash, this.retention.retentionOf(registered));
      return this.handle<ResultOf<W>>(registered, execution);
    }
    await this.enqueue(registered, execution.executionId);
    return this.handle<ResultOf<W>>(registered, execution);
  }

  /** The handle of the newest execution of a workflow id (the live or completed one when there is one). */
  async getHandle<R = unknown>(workflowId: string): Promise<WorkflowHandle<R>> {
    const execution = await this.store.latest(workflowId);
    if (!execution) throw new WorkflowNotFoundError(`no execution has workflow id "${workflowId}"`);
    return this.handle<R>(this.registry.find(execution.workflowName), execution);
  }

  /**
   * Cancels the live execution of a workflow id: a running step finishes (and is checkpointed), no further step
   * starts, the status becomes cancelled. Returns false when there was nothing live to cancel.
   */
  async cancel(workflowId: string): Promise<boolean> {
    const execution = await this.store.cancel(workflowId);
    if (!execution) {
      if (!(await this.store.latest(workflowId))) throw new WorkflowNotFoundError(`no execution has workflow id "${workflowId}"`);
      return false;
    }
    const workflow = this.registry.find(execution.workflowName);
    if (workflow) {
      // A run that has not started yet need not start at all; an active one stops before its next step.
      await this.queues.queue(workflow.queue).remove(workflowJobId(execution.executionId)).catch(() => undefined);
      this.queues.notify(workflow.queue, workflowJobId(execution.executionId), { kind: 'check' });
    }
    return true;
  }

  /**
   * Resumes the newest failed or cancelled execution of a workflow id from its checkpoints: completed steps are kept;
   * the failures that ended it and those its run never received run again, failures the workflow caught stay (README
   * "Resume and caught failures"). Returns the handle; a live or completed execution is returned as it is. Throws
   * WorkflowExistsError when a newer execution holds the workflow id.
   */
  async resume<R = unknown>(workflowId: string): Promise<WorkflowHandle<R>> {
    const latest = await this.store.latest(workflowId);
    if (!latest) throw new WorkflowNotFoundError(`no execution has workflow id "${workflowId}"`);
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

  /** Executions, newest first, filtered by status and workflow. */
  async list(options: ListWorkflowsOptions = {}): Promise<WorkflowExecution[]> {
    const workflow = options.workflow === undefined ? undefined : typeof options.workflow === 'string' ? options.workflow : this.registry.get(options.workflow).name;
    return this.store.list({ ...options, workflow });
  }

  /** The step checkpoints of an execution, in position order. */
  async steps(executionId: string): Promise<StepCheckpoint[]> {
    return this.store.steps(executionId);
  }

  private async enqueue(workflow: RegisteredWorkflow, executionId: string): Promise<void> {
    try {
      const jobId = workflowJobId(executionId);
      await this.queues.queue(workflow.queue).add(workflow.name, { executionId, trace: this.observer.carrier() }, { jobId, removeOnComplete: true, removeOnFail: true });
    } catch (err) {
      // Postgres holds the execution; the reconciler enqueues it once Redis answers again.
      this.logger.warn(`execution ${executionId} was stored but not enqueued (${(err as Error).message}); the reconciler will enqueue it`);
    }
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
