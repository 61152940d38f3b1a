import { WorkflowError } from './workflow.error';

/** On replay, the step called at a position is not the one recorded there: the workflow code changed or is not deterministic. */
export class DeterminismError extends WorkflowError {
  readonly code = 'WORKFLOW_NONDETERMINISTIC';

  constructor(readonly executionId: string, readonly position: number, readonly recorded: string, readonly called: string) {
    super(
      `execution ${executionId}: step #${position} was recorded as "${recorded}" but the code now calls "${called}" there. ` +
        'Workflow code must call the same steps in the same order on every replay (see "Determinism rules").',
    );
    this.name = 'DeterminismError';
  }
}
