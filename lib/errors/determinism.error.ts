import { WorkflowError } from './workflow.error';

/** How a replayed step call differs from what is recorded at its position. */
export interface DeterminismMismatch {
  /** Hash of the recorded call's canonical arguments (null when not recorded). */
  recordedArgsHash?: string | null;
  /** Hash of this call's canonical arguments. */
  calledArgsHash?: string | null;
  /** The recorded step's outcome was due but the code had not called it (it awaited something other than steps, or changed). */
  notCalled?: boolean;
}

function describe(executionId: string, position: number, recorded: string, called: string, m: DeterminismMismatch): string {
  const rules = 'Workflow code must call the same steps with the same arguments in the same order on every replay (see "Determinism rules").';
  if (m.notCalled) {
    return `execution ${executionId}: the outcome of step #${position} ("${recorded}") was due next, but the code did not call that step. ${rules}`;
  }
  if (recorded === called) {
    return `execution ${executionId}: step #${position} ("${recorded}") was recorded with arguments ${m.recordedArgsHash ?? '?'} ` +
      `but the code now calls it with arguments ${m.calledArgsHash ?? '?'} (hashes of their canonical JSON). ${rules}`;
  }
  return `execution ${executionId}: step #${position} was recorded as "${recorded}" but the code now calls "${called}" there. ${rules}`;
}

/**
 * On replay, the step called at a position is not the one recorded there (another name, or other arguments), or the
 * code did not call a recorded step in its turn: the workflow code changed or is not deterministic.
 */
export class DeterminismError extends WorkflowError {
  readonly code = 'WORKFLOW_NONDETERMINISTIC';
  readonly recordedArgsHash: string | null;
  readonly calledArgsHash: string | null;

  constructor(readonly executionId: string, readonly position: number, readonly recorded: string, readonly called: string, mismatch: DeterminismMismatch = {}) {
    super(describe(executionId, position, recorded, called, mismatch));
    this.name = 'DeterminismError';
    this.recordedArgsHash = mismatch.recordedArgsHash ?? null;
    this.calledArgsHash = mismatch.calledArgsHash ?? null;
  }
}
