/** Base class of the durable-workflow errors: each has a stable `code` to branch on. */
export abstract class WorkflowError extends Error {
  /** A stable, machine-readable code, e.g. `WORKFLOW_CONFLICT`. */
  abstract readonly code: string;
}
