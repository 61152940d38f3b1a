import { TASK_METADATA, TASK_METHODS_METADATA } from './task.constants';
import type { TaskOptions } from './task.interfaces';

/**
 * Marks a method of any provider as an idempotent background task. `TaskClient.enqueue(Provider, 'method', args)`
 * runs it as a BullMQ job with its outcome stored in Postgres; called from a workflow's `run()` it runs as that
 * workflow's checkpointed step on the task's queue; called anywhere else it is a plain (async) method call.
 * Arguments and results must be JSON-serializable. Options are validated at bootstrap.
 */
export function Task(options: TaskOptions = {}): MethodDecorator {
  return (target, propertyKey, descriptor) => {
    Reflect.defineMetadata(TASK_METADATA, { ...options }, descriptor.value as object);
    const listed = (Reflect.getOwnMetadata(TASK_METHODS_METADATA, target) as (string | symbol)[] | undefined) ?? [];
    Reflect.defineMetadata(TASK_METHODS_METADATA, [...listed, propertyKey], target);
    return descriptor;
  };
}
