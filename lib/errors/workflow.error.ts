import { IdempotencyError } from './idempotency.error';

/** Base class of the durable-workflow errors: each has a stable `code` to branch on. */
export abstract class WorkflowError extends IdempotencyError {}
