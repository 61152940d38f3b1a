import { setTimeout as sleep } from 'node:timers/promises';
import { StoreRejectedError } from '../errors/store-rejected.error';
import { StoreUnavailableError } from '../errors/store-unavailable.error';
import { DEADLOCK_DETECTED, SERIALIZATION_FAILURE, sqlState } from './postgres-transactions';

/** Runs of a transaction that Postgres aborted for a conflict, at most (the last conflict is then thrown). */
export const MAX_CONFLICT_RUNS = 10;
/** Each run after a conflict waits a random part of this many ms times the conflicts so far, so the two sides part. */
const CONFLICT_JITTER_MS = 10;

/** A serialization failure or a deadlock: the transaction was rolled back, and running it again may succeed. */
export function isConflict(err: unknown): boolean {
  const code = sqlState(err);
  return code === SERIALIZATION_FAILURE || code === DEADLOCK_DETECTED;
}

/**
 * The library's own statements of a transaction (the claim, the completion, the COMMIT) failed for a conflict: the
 * store error they were reported as wraps it. A conflict raised by the work's own statements is not one of these.
 */
export function isConflictOfOurs(err: unknown): boolean {
  return (err instanceof StoreUnavailableError || err instanceof StoreRejectedError) && isConflict(err.cause);
}

/** The wait before the next run, after `conflicts` conflicts so far. */
export function pauseAfterConflict(conflicts: number): Promise<void> {
  return sleep(Math.random() * CONFLICT_JITTER_MS * conflicts);
}
