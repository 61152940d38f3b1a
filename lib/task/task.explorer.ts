import { Inject, Injectable, OnModuleInit, Optional } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { WorkflowDefinitionError } from '../errors/workflow-definition.error';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { QueueSettings } from '../queues/queue-settings';
import { TransactionalSteps } from '../transaction/transactional-steps';
import { WorkflowStore } from '../workflow/storage/workflow.store';
import { WorkflowExecutor } from '../workflow/workflow.executor';
import { WorkflowQueues } from '../workflow/workflow-queues';
import { RegisteredWorkflow, WorkflowRegistry } from '../workflow/workflow.registry';
import { checkTaskOptions } from './task-options.validator';
import { addTaskJob } from './task-job';
import { finishTask } from './task-run';
import { TaskMetadataAccessor } from './task-metadata.accessor';
import { RegisteredTask, TaskRegistry } from './task.registry';

/**
 * Finds the `@Task()` methods of every provider at module init, validates them (unique names across tasks and
 * workflows, valid options, a task queue that is no workflow queue, Redis configured) and fails bootstrap with
 * WorkflowDefinitionError listing every problem. Each task is registered twice: in the task registry (for
 * `TaskClient`) and in the workflow registry as a workflow without a run whose only step is the method (so the step
 * worker runs its jobs and the reconciler re-adds lost ones). The method is wrapped on the instance: inside a
 * workflow's `run()` it becomes a durable step of that workflow; anywhere else it stays a plain call.
 */
@Injectable()
export class TaskExplorer implements OnModuleInit {
  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly discovery: DiscoveryService,
    private readonly metadata: TaskMetadataAccessor,
    private readonly tasks: TaskRegistry,
    private readonly workflows: WorkflowRegistry,
    private readonly executor: WorkflowExecutor,
    private readonly store: WorkflowStore,
    private readonly queues: WorkflowQueues,
    private readonly queueSettings: QueueSettings,
    @Optional() private readonly transactionalSteps?: TransactionalSteps,
  ) {}

  onModuleInit(): void {
    const problems: string[] = [];
    const found: RegisteredTask[] = [];
    const seen = new Set<unknown>();
    for (const wrapper of this.discovery.getProviders()) {
      const type = wrapper.metatype as (abstract new (...args: never[]) => unknown) | undefined;
      if (!type || seen.has(type) || typeof type !== 'function') continue;
      const declared = this.metadata.tasks(type);
      if (declared.length === 0) continue;
      seen.add(type);
      if (!wrapper.isDependencyTreeStatic() || wrapper.isTransient) {
        problems.push(`${type.name}: a provider with @Task() methods must be a singleton (not request-scoped or transient)`);
        continue;
      }
      for (const { method, options } of declared) {
        const where = `@Task() on ${type.name}.${String(method)}`;
        const original = (type.prototype as Record<string | symbol, unknown>)[method];
        if (typeof method === 'symbol' || typeof original !== 'function') {
          problems.push(`${where}: a task must be a method with a string name`);
          continue;
        }
        const checked = checkTaskOptions(options, method, where, problems);
        if (checked.step.transaction && !this.transactionalSteps) {
          problems.push(`${where}: transaction: true needs the Postgres store of IdempotencyModule.forRoot(); this module has none (IdempotencyTestingModule?)`);
        }
        const instance = wrapper.instance as object;
        const step = { ...checked.step, owner: checked.name, method, original: (original as (...args: unknown[]) => unknown).bind(instance) };
        const registration: RegisteredWorkflow = {
          name: checked.name,
          type,
          instance: instance as RegisteredWorkflow['instance'],
          queue: step.queue,
          identity: checked.identity,
          retentionMs: checked.retentionMs,
          steps: new Map([[step.name, step]]),
          task: { recover: (executionId) => this.recover(task, executionId) },
        };
        const task: RegisteredTask = { name: checked.name, type, method, step, registration };
        found.push(task);
      }
    }
    this.checkNames(found, problems);
    if (found.length > 0 && !this.options.redis && !this.options.workflows.inline) {
      problems.push(`tasks (${found.map((t) => t.name).join(', ')}) run on BullMQ and need Redis: set the \`redis\` option of IdempotencyModule`);
    }
    if (problems.length > 0) throw new WorkflowDefinitionError(problems);
    this.queueSettings.declare(found.map((t) => t.step.queue));
    for (const task of found) {
      this.wrap(task);
      this.tasks.add(task);
      this.workflows.add(task.registration);
    }
  }

  private checkNames(found: RegisteredTask[], problems: string[]): void {
    const byName = new Map<string, RegisteredTask>();
    const workflowQueues = new Set(this.workflows.workflowQueues());
    for (const task of found) {
      const label = `${task.type.name}.${task.method}`;
      const clash = byName.get(task.name);
      if (clash) problems.push(`tasks ${clash.type.name}.${clash.method} and ${label} share the name "${task.name}"; task names must be unique`);
      if (this.workflows.find(task.name)) problems.push(`task ${label} is named "${task.name}" like a workflow; task and workflow names must differ`);
      if (workflowQueues.has(task.step.queue)) problems.push(`task ${label} uses queue "${task.step.queue}", which is a workflow queue; use a separate task queue`);
      byName.set(task.name, task);
    }
  }

  /** Replaces the method on the instance: a durable step inside a workflow run, a plain call anywhere else. */
  private wrap(task: RegisteredTask): void {
    const executor = this.executor;
    const wrapper = function (this: unknown, ...args: unknown[]): Promise<unknown> {
      return executor.callStep(task.step, this, args);
    };
    Object.defineProperty(wrapper, 'name', { value: task.method });
    Object.defineProperty(task.registration.instance, task.method, { value: wrapper, writable: true, configurable: true, enumerable: false });
  }

  /**
   * The reconciler found an unfinished task execution without a live job. An enqueued task counts a recovery (past
   * `maxRecoveryAttempts` it fails) and its job is added again (same job id). A task called from a workflow is the
   * parent's step: its record is settled from the parent's checkpoint once there is one, and otherwise left to the parent.
   */
  private async recover(task: RegisteredTask, executionId: string): Promise<boolean> {
    const execution = await this.store.get(executionId);
    if (!execution || (execution.status !== 'pending' && execution.status !== 'running')) return false;
    if (execution.parentExecutionId) {
      const position = Number(execution.workflowId.slice(execution.parentExecutionId.length + 1));
      const { status, checkpoint } = await this.store.stepState(execution.parentExecutionId, position);
      if (checkpoint) await finishTask(this.store, executionId, checkpoint);
      // The parent ended (or is gone) without this step's outcome: the call will not finish.
      else if (status !== 'pending' && status !== 'running') await this.store.cancel(execution.workflowId, 'task');
      return false;
    }
    if (!(await this.store.countRecovery(executionId, this.options.workflows.maxRecoveryAttempts))) return false;
    await addTaskJob(this.queues, task, { executionId, taskId: execution.workflowId, args: execution.input as unknown[] });
    return true;
  }
}
