/** Metadata key of `@Workflow()`. */
export const WORKFLOW_METADATA = 'nestjs-idempotency:workflow';
/** Metadata key of `@Step()` (on the method). */
export const STEP_METADATA = 'nestjs-idempotency:step';
/** Metadata key listing the `@Step()` methods of a class (on the prototype). */
export const STEP_METHODS_METADATA = 'nestjs-idempotency:step-methods';
/** Default queue of workflow runs. */
export const DEFAULT_WORKFLOW_QUEUE = 'workflows';
/** Default queue of step jobs. */
export const DEFAULT_STEP_QUEUE = 'steps';

/** @internal The topic of `recv()` and `send()` without one. */
export const DEFAULT_TOPIC = '';
