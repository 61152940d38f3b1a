import { AsyncLocalStorage } from 'node:async_hooks';
import type { RunJournal } from './run-journal';
import type { RegisteredWorkflow } from './workflow.registry';
import type { WorkflowExecution } from './workflow.interfaces';

/** Why a run stopped before its function returned. */
export type StopReason = 'cancelled' | 'timed_out' | 'finished' | 'shutdown' | 'nondeterministic' | 'infrastructure';

/** @internal Thrown into a run that must not start further steps. */
export class RunStopped extends Error {
  constructor(readonly reason: StopReason, readonly error?: unknown) {
    super(`workflow run stopped: ${reason}`);
    this.name = 'RunStopped';
  }
}

/** @internal The state of one replay of one execution. */
export interface RunContext {
  execution: WorkflowExecution;
  workflow: RegisteredWorkflow;
  /** Step positions and the recorded outcomes, handed to the workflow code in their recorded order. */
  journal: RunJournal;
  /** Set when no further step may start; pending waits end with it. */
  stopped?: RunStopped;
  /** Fires when `stopped` is set. */
  abort: AbortController;
}

/** @internal The run whose workflow function is executing in this async call chain. */
export const runStorage = new AsyncLocalStorage<RunContext>();

/** Stops a run: no further step starts and every pending wait ends. The first reason wins. */
export function stopRun(run: RunContext, stop: RunStopped): void {
  if (run.stopped) return;
  run.stopped = stop;
  run.journal.close(stop);
  run.abort.abort();
}
