import type { RunLock } from './step-job';
import { AsyncLocalStorage } from 'node:async_hooks';
import type { DurableCalls } from './durable-calls';
import type { RunJournal } from './run-journal';
import type { RegisteredWait } from './storage/workflow.store';
import type { RegisteredWorkflow } from './workflow.registry';
import type { WorkflowExecution } from './workflow.interfaces';

/** Why a run stopped before its function returned. */
export type StopReason = 'cancelled' | 'timed_out' | 'finished' | 'shutdown' | 'nondeterministic' | 'infrastructure' | 'suspended';

/** @internal Thrown into a run that must not start further steps. */
export class RunStopped extends Error {
  /** `until`: for 'suspended', when the run should wake (ms since the epoch; Infinity: on a message or a child only). */
  constructor(readonly reason: StopReason, readonly error?: unknown, readonly until?: number) {
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
  /** What `sleep`, `recv`, `setEvent` and the child calls use. */
  calls: DurableCalls;
  /** Journal outcomes being produced without a durable wait (step jobs, writes): while any is, the run stays. */
  busy: number;
  /** The waits registered before this run began, by position. */
  registeredWaits: Map<number, RegisteredWait>;
  /** The durable waits (sleep, recv, a child's result) this run is in, by position. */
  waits: Map<number, RunWait>;
  /** Step jobs of this run may skip the read before the step (see `StepJobData.fresh`). */
  fresh: boolean;
  /** The lock of the workflow job this run holds, when run by a BullMQ worker (see `StepJobData.freshLock`). */
  lock?: RunLock;
  /** An idle check is scheduled (see `scheduleIdleCheck`). */
  idleCheckScheduled?: boolean;
}

/** @internal A durable wait in progress: when it ends by time (Infinity: never by time), and how to end it early. */
export interface RunWait {
  until: number;
  nudge(): void;
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
