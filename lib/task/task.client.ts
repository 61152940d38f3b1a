import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { LibraryLogger } from '../observability/library-logger';
import { MissingTaskIdError } from '../errors/missing-task-id.error';
import { TaskConflictError } from '../errors/task-conflict.error';
import { TaskExistsError } from '../errors/task-exists.error';
import { TaskNotFoundError } from '../errors/task-not-found.error';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { IdempotencyObserver, NoopObserver } from '../observability/idempotency-observer';
import { canonicalJson } from '../utils/canonical-json';
import { parseDuration } from '../utils/duration';
import { WorkflowStore } from '../workflow/storage/workflow.store';
import { uuidv7 } from '../workflow/uuidv7';
import type { WorkflowExecution } from '../workflow/workflow.interfaces';
import { inputHash, resolveWorkflowId } from '../workflow/workflow-identity';
import { workflowJobId, WorkflowQueues } from '../workflow/workflow-queues';
import { RegisteredWorkflowRetention } from '../workflow/workflow-retention';
import { addWithin } from '../workflow/add-within';
import { addTaskJob } from './task-job';
import { TaskHandle } from './task-handle';
import type { EnqueueTaskOptions, ListTasksOptions } from './task.interfaces';
import { RegisteredTask, TaskRegistry } from './task.registry';

/** How long `enqueue()` waits for Redis to take the job before it returns (the add goes on in the background). */

/** The methods of a provider that can be enqueued (any method; `@Task()` is checked at run time). */
export type TaskMethod<T> = { [K in keyof T]: T[K] extends (...args: never[]) => unknown ? K : never }[keyof T] & string;
type ArgsOf<T, K extends keyof T> = T[K] extends (...args: infer A) => unknown ? A : never;
type ResultOf<T, K extends keyof T> = T[K] extends (...args: never[]) => infer R ? Awaited<R> : never;

/** Enqueues `@Task()` methods idempotently, and finds, cancels and lists task executions. */
@Injectable()
export class TaskClient {
  private readonly logger: Logger = new LibraryLogger('Workflows');
  @Optional() @Inject(IdempotencyObserver) private readonly observer: IdempotencyObserver = new NoopObserver();

  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly tasks: TaskRegistry,
    private readonly store: WorkflowStore,
    private readonly queues: WorkflowQueues,
    private readonly retention: RegisteredWorkflowRetention,
  ) {}

  /**
   * Enqueues `provider.method(...args)` as a task, or returns the execution that already holds its task id: pending,
   * running or completed → that handle (a completed one's `result()` is the cached result); failed, cancelled and
   * timed-out executions do not hold the id, so a new execution starts. The same id with other arguments (or of another
   * task) throws TaskConflictError; `onConflict: 'error'` throws TaskExistsError instead of returning an existing one.
   * Without `taskId`, the task's identity strategy names it (`strict`: name + canonical arguments).
   */
  async enqueue<T extends object, K extends TaskMethod<T>>(
    provider: abstract new (...args: never[]) => T,
    method: K,
    args: ArgsOf<T, K>,
    options: EnqueueTaskOptions = {},
  ): Promise<TaskHandle<ResultOf<T, K>>> {
    const task = this.tasks.get(provider, method);
    if (!Array.isArray(args)) throw new TypeError(`enqueue(${provider.name}, '${method}', args): args must be the array of the method's arguments`);
    if (options.onConflict !== undefined && options.onConflict !== 'return-existing' && options.onConflict !== 'error') {
      throw new TypeError(`onConflict must be "return-existing" or "error", got ${JSON.stringify(options.onConflict)}`);
    }
    const delayMs = options.delay === undefined ? undefined : parseDuration(options.delay);
    if (typeof delayMs === 'object') throw new TypeError(`enqueue({ delay }): ${delayMs.error}`);
    const canonical = canonicalJson(args);
    const hash = inputHash(task.name, canonical);
    const taskId = this.taskIdOf(task, hash, options.taskId);
    const executionId = uuidv7();
    const stored = JSON.parse(canonical) as unknown[];
    const { inserted, execution } = await this.store.insert({ executionId, workflowId: taskId, workflowName: task.name, input: stored, inputHash: hash, kind: 'task' });
    // A retried insert whose first attempt committed (the reply was lost) reads back its own row.
    if (inserted || execution.executionId === executionId) {
      await this.addJob(task, { executionId, taskId, args: stored }, delayMs);
      return this.handle(task, execution);
    }
    if (execution.kind !== 'task' || execution.workflowName !== task.name) {
      throw new TaskConflictError(taskId, execution.executionId, `of another ${execution.kind} ("${execution.workflowName}")`);
    }
    if (execution.inputHash !== hash) throw new TaskConflictError(taskId, execution.executionId, 'with other arguments');
    if (options.onConflict === 'error') {
      const completed = execution.status === 'completed';
      throw new TaskExistsError(taskId, execution.executionId, execution.status, completed ? execution.completedAt : undefined, completed ? execution.result : undefined);
    }
    return this.handle(task, execution);
  }

  /** The handle of the newest execution of a task id (the live or completed one when there is one). */
  async getTask<R = unknown>(taskId: string): Promise<TaskHandle<R>> {
    const execution = await this.store.latest(taskId);
    if (!execution || execution.kind !== 'task') throw new TaskNotFoundError(`no task has id "${taskId}"`);
    return this.handle<R>(undefined, execution);
  }

  /**
   * Cancels the pending or running execution of a task id: a job not yet started does not start; an attempt in
   * progress finishes but its outcome is not stored as the task's. Returns false when there was nothing live to cancel.
   */
  async cancel(taskId: string): Promise<boolean> {
    const latest = await this.store.latest(taskId);
    if (!latest || latest.kind !== 'task') throw new TaskNotFoundError(`no task has id "${taskId}"`);
    const execution = await this.store.cancel(taskId, 'task');
    if (!execution) return false;
    const queue = this.queueOf(execution);
    await this.queues.queue(queue).remove(workflowJobId(execution.executionId)).catch(() => undefined);
    this.queues.notify(queue, workflowJobId(execution.executionId), { kind: 'check' });
    return true;
  }

  /** Task executions, newest first, filtered by status and task name. */
  list(options: ListTasksOptions = {}): Promise<WorkflowExecution[]> {
    return this.store.list({ status: options.status, workflow: options.task, limit: options.limit, kind: 'task' });
  }

  private taskIdOf(task: RegisteredTask, hash: string, explicit?: string): string {
    if (explicit !== undefined && (typeof explicit !== 'string' || explicit.length === 0 || explicit.length > 255)) {
      throw new TypeError(`taskId must be a string of 1 to 255 characters, got ${JSON.stringify(explicit)}`);
    }
    if (explicit === undefined && task.registration.identity === 'caller_provided') throw new MissingTaskIdError(task.name);
    return resolveWorkflowId(task.name, task.registration.identity, hash, explicit);
  }

  /** Adds the job, waiting for Redis at most ADD_WAIT_MS (see addWithin). */
  private async addJob(task: RegisteredTask, execution: { executionId: string; taskId: string; args: unknown[] }, delayMs?: number): Promise<void> {
    await addWithin(addTaskJob(this.queues, task, execution, delayMs, this.observer.carrier()), (err) => {
      this.logger.warn(`task execution ${execution.executionId} was stored but not enqueued (${err.message}); the reconciler will enqueue it`);
    });
  }

  private queueOf(execution: WorkflowExecution): string {
    return this.tasks.byName(execution.workflowName)?.step.queue ?? 'tasks';
  }

  private handle<R>(task: RegisteredTask | undefined, execution: WorkflowExecution): TaskHandle<R> {
    const found = task ?? this.tasks.byName(execution.workflowName);
    return new TaskHandle<R>(
      execution.workflowId,
      execution.executionId,
      found?.step.queue ?? 'tasks',
      this.store,
      this.queues,
      this.options.workflows.pollIntervalMs,
      found !== undefined && this.retention.retentionOf(found.registration) === 0,
    );
  }
}
