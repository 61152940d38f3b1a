import { Inject, Injectable, OnModuleInit, Optional } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import { WorkflowDefinitionError } from '../errors/workflow-definition.error';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { checkStepOptions, checkWorkflowOptions } from './workflow-definition.validator';
import { TransactionalSteps } from '../transaction/transactional-steps';
import { QueueSettings } from '../queues/queue-settings';
import { WorkflowExecutor } from './workflow.executor';
import { WorkflowMetadataAccessor } from './workflow-metadata.accessor';
import { RegisteredStep, RegisteredWorkflow, WorkflowRegistry } from './workflow.registry';

/**
 * Finds the `@Workflow()` providers at module init, validates them (a `run` method, unique workflow names, unique
 * step names per workflow, valid options, Redis configured) and fails bootstrap with WorkflowDefinitionError listing
 * every problem. Valid workflows go to the registry, and their `@Step()` methods are wrapped on the instance so that
 * calls from `run()` go through the executor.
 */
@Injectable()
export class WorkflowExplorer implements OnModuleInit {
  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly discovery: DiscoveryService,
    private readonly metadata: WorkflowMetadataAccessor,
    private readonly registry: WorkflowRegistry,
    private readonly executor: WorkflowExecutor,
    private readonly queueSettings: QueueSettings,
    @Optional() private readonly transactionalSteps?: TransactionalSteps,
  ) {}

  onModuleInit(): void {
    const problems: string[] = [];
    const found: RegisteredWorkflow[] = [];
    const seen = new Set<unknown>();
    for (const wrapper of this.discovery.getProviders()) {
      const type = wrapper.metatype as (abstract new (...args: never[]) => unknown) | undefined;
      const options = type ? this.metadata.workflowOptions(type) : undefined;
      if (!type || !options || seen.has(type)) continue;
      seen.add(type);
      const workflow = this.inspect(wrapper, type, options, problems);
      if (workflow) found.push(workflow);
    }
    this.checkNames(found, problems);
    if (found.length > 0 && !this.options.redis && !this.options.workflows.inline) {
      problems.push(`workflows (${found.map((w) => w.name).join(', ')}) run on BullMQ and need Redis: set the \`redis\` option of IdempotencyModule`);
    }
    if (problems.length > 0) throw new WorkflowDefinitionError(problems);
    for (const workflow of found) {
      this.wrapSteps(workflow);
      this.registry.add(workflow);
    }
    this.queueSettings.declare(this.registry.workflowQueues());
    this.queueSettings.declare(this.registry.stepQueues(), 'steps');
  }

  private inspect(
    wrapper: InstanceWrapper,
    type: abstract new (...args: never[]) => unknown,
    raw: object,
    problems: string[],
  ): RegisteredWorkflow | undefined {
    const className = type.name;
    const before = problems.length;
    const options = checkWorkflowOptions(raw, className, problems);
    if (!wrapper.isDependencyTreeStatic() || wrapper.isTransient) {
      problems.push(`${className}: a workflow must be a singleton provider (not request-scoped or transient)`);
    }
    const run = (type.prototype as { run?: unknown }).run;
    if (typeof run !== 'function') problems.push(`${className}: a workflow needs a run(input) method, its entry point`);
    const steps = new Map<string, RegisteredStep>();
    for (const declared of this.metadata.steps(type)) {
      const method = String(declared.method);
      const where = `@Step() on ${className}.${method}`;
      if (typeof declared.method === 'symbol') problems.push(`${where}: step methods need a string name`);
      if (declared.method === 'run') problems.push(`${where}: run() is the workflow's entry point and cannot be a step`);
      const original = (type.prototype as Record<string | symbol, unknown>)[declared.method];
      if (typeof original !== 'function') {
        problems.push(`${where}: not a method`);
        continue;
      }
      const checked = checkStepOptions(declared.options, method, where, problems);
      const clash = steps.get(checked.name);
      if (clash) {
        problems.push(`${className}: steps ${String(clash.method)} and ${method} share the name "${checked.name}"; step names must be unique within a workflow`);
        continue;
      }
      if (checked.transaction && !this.transactionalSteps) {
        problems.push(`${where}: transaction: true needs the Postgres store of IdempotencyModule.forRoot(); this module has none (IdempotencyTestingModule?)`);
      }
      steps.set(checked.name, { ...checked, owner: options.name, method: declared.method, original: original as RegisteredStep['original'] });
    }
    if (problems.length > before) return undefined;
    for (const step of steps.values()) {
      if (step.queue === options.queue) {
        problems.push(`${className}: step "${step.name}" uses queue "${step.queue}", which is the workflow's queue; use a separate step queue`);
      }
    }
    return {
      ...options,
      type,
      instance: wrapper.instance as RegisteredWorkflow['instance'],
      steps,
    };
  }

  private checkNames(found: RegisteredWorkflow[], problems: string[]): void {
    const byName = new Map<string, RegisteredWorkflow>();
    for (const workflow of found) {
      const clash = byName.get(workflow.name);
      if (clash) problems.push(`workflows ${clash.type.name} and ${workflow.type.name} share the name "${workflow.name}"; workflow names must be unique`);
      byName.set(workflow.name, workflow);
    }
    const workflowQueues = new Set(found.map((w) => w.queue));
    for (const workflow of found) {
      for (const step of workflow.steps.values()) {
        if (workflowQueues.has(step.queue) && step.queue !== workflow.queue) {
          problems.push(`${workflow.type.name}: step "${step.name}" uses queue "${step.queue}", which is a workflow queue; use a separate step queue`);
        }
      }
    }
  }

  /** Replaces each step method on the instance with a wrapper that routes calls made inside a run through the executor. */
  private wrapSteps(workflow: RegisteredWorkflow): void {
    const executor = this.executor;
    for (const step of workflow.steps.values()) {
      const wrapper = function (this: unknown, ...args: unknown[]): Promise<unknown> {
        return executor.callStep(step, this, args);
      };
      Object.defineProperty(wrapper, 'name', { value: String(step.method) });
      Object.defineProperty(workflow.instance, step.method, { value: wrapper, writable: true, configurable: true, enumerable: false });
    }
  }
}
