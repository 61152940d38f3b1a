import { DeterminismError } from '../errors/determinism.error';
import { RunContext, RunStopped, stopRun } from './run-context';
import type { RecordedStep, RegisteredWait } from './storage/workflow.store';

/**
 * @internal The call made at a journal position must be the one recorded there: same name (a step's, or `@sleep`,
 * `@recv`, … for the durable calls), same argument hash (when both are known). Otherwise the run stops and the
 * DeterminismError is thrown.
 */
export function verifyRecorded(run: RunContext, position: number, name: string, argsHash: string | null, recorded: RecordedStep): void {
  const sameArgs = recorded.argsHash === null || argsHash === null || recorded.argsHash === argsHash;
  if (recorded.name === name && sameArgs) return;
  const error = new DeterminismError(run.execution.executionId, position, recorded.name, name, {
    recordedArgsHash: recorded.argsHash,
    calledArgsHash: argsHash,
  });
  stopRun(run, new RunStopped('nondeterministic', error));
  throw error;
}

/** @internal A registered wait as the journal row it stands for, to verify a call against (`@sleep`, `@recv`). */
export function waitAsRecorded(position: number, wait: RegisteredWait): RecordedStep {
  return { position, name: `@${wait.kind}`, status: 'retrying', result: null, error: null, attempts: 0, completedAt: new Date(0), sequence: -1, argsHash: wait.argsHash };
}
