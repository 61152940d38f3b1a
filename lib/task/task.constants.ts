/** Metadata key of `@Task()` (on the method). */
export const TASK_METADATA = 'nestjs-idempotency:task';
/** Metadata key listing the `@Task()` methods of a class (on the prototype). */
export const TASK_METHODS_METADATA = 'nestjs-idempotency:task-methods';
/** Default queue of task jobs. */
export const DEFAULT_TASK_QUEUE = 'tasks';
