import { IdempotencyConfigError } from './idempotency-config.error';

/**
 * Thrown at bootstrap when a `@Workflow()` class breaks the contract (no `run`, duplicate names, invalid or unknown
 * options). It is an `IdempotencyConfigError`, like every other option error.
 */
export class WorkflowDefinitionError extends IdempotencyConfigError {
  override readonly code = 'WORKFLOW_DEFINITION';

  constructor(problems: string[]) {
    super(problems, 'Invalid workflow definition');
    this.name = 'WorkflowDefinitionError';
  }
}
