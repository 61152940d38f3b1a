import { STEP_METADATA, STEP_METHODS_METADATA } from './workflow.constants';
import type { StepOptions } from './workflow.interfaces';

/**
 * Marks a method of a `@Workflow()` class as a durable step: called from `run()`, it runs as a BullMQ job
 * and its outcome is checkpointed, so a replay returns the stored result instead of running it again.
 * Arguments and results must be JSON-serializable. Options are validated at bootstrap.
 */
export function Step(options: StepOptions = {}): MethodDecorator {
  return (target, propertyKey, descriptor) => {
    Reflect.defineMetadata(STEP_METADATA, { ...options }, descriptor.value as object);
    const listed = (Reflect.getOwnMetadata(STEP_METHODS_METADATA, target) as (string | symbol)[] | undefined) ?? [];
    Reflect.defineMetadata(STEP_METHODS_METADATA, [...listed, propertyKey], target);
    return descriptor;
  };
}
