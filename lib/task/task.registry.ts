import { Injectable } from '@nestjs/common';
import { TaskNotFoundError } from '../errors/task-not-found.error';
import type { RegisteredStep, RegisteredWorkflow } from '../workflow/workflow.registry';

/** A validated `@Task()` method. */
export interface RegisteredTask {
  name: string;
  type: abstract new (...args: never[]) => unknown;
  method: string;
  /** Its step (queue, attempts, backoff, timeout, transaction): what runs it, standalone or in a workflow. */
  step: RegisteredStep;
  /** Its entry in the workflow registry (the step worker and the reconciler find it there by name). */
  registration: RegisteredWorkflow;
}

/** (class, method) → task, filled once by the task explorer at bootstrap. */
@Injectable()
export class TaskRegistry {
  private readonly byMethod = new Map<unknown, Map<string, RegisteredTask>>();
  private readonly byTaskName = new Map<string, RegisteredTask>();

  /** Adds a task. */
  add(task: RegisteredTask): void {
    const methods = this.byMethod.get(task.type) ?? new Map<string, RegisteredTask>();
    methods.set(task.method, task);
    this.byMethod.set(task.type, methods);
    this.byTaskName.set(task.name, task);
  }

  /** The task by stored name, if registered here. */
  byName(name: string): RegisteredTask | undefined {
    return this.byTaskName.get(name);
  }

  /** The task of a provider's method; throws TaskNotFoundError when it is not a registered `@Task()`. */
  get(type: abstract new (...args: never[]) => unknown, method: string): RegisteredTask {
    const found = this.byMethod.get(type)?.get(method);
    if (!found) {
      throw new TaskNotFoundError(`${type.name}.${method} is not a registered task: decorate it with @Task() and add ${type.name} to a module's providers`);
    }
    return found;
  }
}
