import { Injectable } from '@nestjs/common';
import { WorkflowNotFoundError } from '../errors/workflow-not-found.error';
import type { TransactionSetting } from '../transaction/transaction-options';
import type { StepBackoff, WorkflowIdentity } from './workflow.interfaces';

/** A validated `@Step()` method. */
export interface RegisteredStep {
  /** Stored name (checked on replay). */
  name: string;
  /** Name of the workflow that declares it. */
  owner: string;
  method: string | symbol;
  /** The undecorated method, called by the step worker. */
  original: (...args: unknown[]) => unknown;
  attempts: number;
  backoff?: StepBackoff;
  timeoutMs?: number;
  queue: string;
  /** `@Step({ transaction: true })`: the step's writes and its checkpoint commit together. */
  transaction: TransactionSetting;
}

/** @internal Set on the registration of a `@Task()` (a task runs as the one step of its own execution). */
export interface TaskHooks {
  /** The reconciler found an unfinished task execution without a live job: re-add it or settle it; true when re-added. */
  recover(executionId: string): Promise<boolean>;
}

/** A validated `@Workflow()` provider, or a `@Task()` (with `task` set; its instance is the task's provider). */
export interface RegisteredWorkflow {
  name: string;
  type: abstract new (...args: never[]) => unknown;
  instance: { run(input: unknown): unknown };
  queue: string;
  identity: WorkflowIdentity;
  timeoutMs?: number;
  /** Set only by `@Workflow({ retention })`; otherwise module retention options decide. */
  retentionMs?: number;
  /** Steps by stored name. */
  steps: Map<string, RegisteredStep>;
  /** Set for a `@Task()`: it has no workflow run, only its step (see lib/task). */
  task?: TaskHooks;
}

/** Name → workflow (instance and step table), filled once by the explorer at bootstrap. Held by DI, one per module. */
@Injectable()
export class WorkflowRegistry {
  private readonly byName = new Map<string, RegisteredWorkflow>();
  private readonly byType = new Map<unknown, RegisteredWorkflow>();

  /** Adds a workflow; the explorer has checked names are unique. */
  add(workflow: RegisteredWorkflow): void {
    this.byName.set(workflow.name, workflow);
    if (!workflow.task) this.byType.set(workflow.type, workflow);
  }

  /** Every registered workflow. */
  all(): RegisteredWorkflow[] {
    return [...this.byName.values()];
  }

  /** True when at least one workflow is registered. */
  get isEmpty(): boolean {
    return this.byName.size === 0;
  }

  /** The workflow by stored name, if registered here. */
  find(name: string): RegisteredWorkflow | undefined {
    return this.byName.get(name);
  }

  /** The workflow by class or stored name; throws WorkflowNotFoundError when it is not registered. */
  get(workflow: string | (abstract new (...args: never[]) => unknown)): RegisteredWorkflow {
    const found = typeof workflow === 'string' ? this.byName.get(workflow) : this.byType.get(workflow);
    if (!found || found.task) {
      const label = typeof workflow === 'string' ? `"${workflow}"` : workflow.name;
      throw new WorkflowNotFoundError(`workflow ${label} is not registered: decorate it with @Workflow() and add it to a module's providers`);
    }
    return found;
  }

  /** The queues that workflow runs use. */
  workflowQueues(): string[] {
    return [...new Set(this.all().filter((w) => !w.task).map((w) => w.queue))];
  }

  /** The queues that step jobs use. */
  stepQueues(): string[] {
    return [...new Set(this.all().flatMap((w) => [...w.steps.values()].map((s) => s.queue)))];
  }
}
