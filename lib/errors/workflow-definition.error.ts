import { WorkflowError } from './workflow.error';

/** Thrown at bootstrap when a `@Workflow()` class breaks the contract (no `run`, duplicate names, invalid options). */
export class WorkflowDefinitionError extends WorkflowError {
  readonly code = 'WORKFLOW_DEFINITION';

  constructor(readonly problems: string[]) {
    super(`Invalid workflow definition:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'WorkflowDefinitionError';
  }
}
