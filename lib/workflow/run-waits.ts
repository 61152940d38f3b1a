import { RunContext, RunStopped, stopRun } from './run-context';
import type { StepCheckpoint } from './workflow.interfaces';
import { setLongTimeout } from '../utils/long-timer';

/**
 * A wait due within this long is waited out in the run (holding its worker slot that briefly) instead of suspending:
 * a suspended run's job is made due this much earlier (WAKE_EARLY_MS), so it has replayed by the wake-up time.
 */
export const HOLD_IN_RUN_MS = 300;

/** How much earlier than its wake-up time a suspended run's job becomes due (it then waits the rest in the run). */
export const WAKE_EARLY_MS = 250;

/**
 * @internal Produces a journal outcome (a step's checkpoint, a fired sleep, a received message …) and hands it to the
 * journal, which delivers it in its turn. While `work` runs the run counts as busy, except inside `waitInRun`. An
 * error other than the run stopping stops the run as an infrastructure failure (the job fails and is recovered).
 */
export async function produceOutcome(run: RunContext, work: () => Promise<StepCheckpoint>): Promise<void> {
  run.busy++;
  try {
    run.journal.record(await work());
  } catch (err) {
    if (!(err instanceof RunStopped)) stopRun(run, new RunStopped('infrastructure', err));
  } finally {
    run.busy--;
    scheduleIdleCheck(run);
  }
}

/**
 * @internal Waits in a run until `until` (ms since the epoch), a nudge, or — with `pollMs` — the next poll, whichever
 * comes first; rejects with the run's stop. While it waits the run does not count it as busy: when every producer of
 * the run is waiting like this, the run suspends (its job is delayed until the earliest `until`, no worker slot held).
 */
export function waitInRun(run: RunContext, position: number, until: number, pollMs?: number): Promise<void> {
  if (run.stopped) return Promise.reject(run.stopped);
  run.busy--;
  return new Promise<void>((resolve, reject) => {
    const wakeAt = pollMs === undefined ? until : Math.min(until, Date.now() + pollMs);
    const timer = wakeAt === Infinity ? undefined : setLongTimeout(() => done(), wakeAt - Date.now());
    const onAbort = () => done(run.stopped ?? new RunStopped('finished'));
    function done(err?: RunStopped): void {
      timer?.clear();
      run.abort.signal.removeEventListener('abort', onAbort);
      if (run.waits.get(position) === wait) run.waits.delete(position);
      run.busy++;
      if (err === undefined) resolve();
      else reject(err);
    }
    const wait = { until, nudge: () => done() };
    run.waits.set(position, wait);
    run.abort.signal.addEventListener('abort', onAbort, { once: true });
    scheduleIdleCheck(run);
  });
}

/** @internal Ends every durable wait of the run early, so each checks again (a message or a child's outcome arrived). */
export function nudgeWaits(run: RunContext): void {
  for (const wait of [...run.waits.values()]) wait.nudge();
}

/**
 * @internal After the workflow code has reacted to what it received (a later macrotask), suspends the run when it only
 * waits: no step or write in flight, nothing for the journal to deliver, and at least one durable wait, none due
 * within HOLD_IN_RUN_MS.
 */
export function scheduleIdleCheck(run: RunContext): void {
  if (run.idleCheckScheduled || run.stopped) return;
  run.idleCheckScheduled = true;
  setImmediate(() => {
    run.idleCheckScheduled = false;
    if (run.stopped || run.busy > 0 || run.waits.size === 0 || !run.journal.isQuiet) return;
    const until = Math.min(...[...run.waits.values()].map((w) => w.until));
    if (until - Date.now() <= HOLD_IN_RUN_MS) return; // due soon: its timer fires in this run
    stopRun(run, new RunStopped('suspended', undefined, until));
  });
}
