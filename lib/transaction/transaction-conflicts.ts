import { setTimeout as sleep } from 'node:timers/promises';
import { StoreUnavailableError } from '../errors/store-unavailable.error';
import { sqlState } from './sql-state';

/** Runs of a transaction that Postgres aborted for a conflict, at most (the last conflict is then thrown). */
export const MAX_CONFLICT_RUNS = 10;
/** Each run after a conflict waits a random part of this many ms times the conflicts so far, so the two sides part. */
const CONFLICT_JITTER_MS = 10;

const SERIALIZATION_FAILURE = '40001';
const DEADLOCK_DETECTED = '40P01';

/** A serialization failure or a deadlock: the transaction was rolled back, and running it again may succeed. */
export function isConflict(err: unknown): boolean {
  const code = sqlState(err);
  return code === SERIALIZATION_FAILURE || code === DEADLOCK_DETECTED;
}

/**
 * The library's own ending of a transaction (the completion and its COMMIT) failed for a conflict: the store error it
 * was reported as wraps it. One at the claim never leaves the engine (the claim is tried again there).
 */
export function isConflictOfOurs(err: unknown): boolean {
  return err instanceof StoreUnavailableError && isConflict(err.cause);
}

/**
 * Postgres aborted a transaction of the library for a conflict, under the work's own statement (its error, as the work
 * threw it) or at the library's completion or COMMIT: either way nothing of it committed, and running it again is
 * Postgres's advice.
 */
export function abortedForConflict(err: unknown): boolean {
  return isConflict(err) || isConflictOfOurs(err);
}

/**
 * Runs `once`, and again after a short random wait each time it fails with an error `conflicted` calls a conflict
 * (Postgres's advice for those), at most {@link MAX_CONFLICT_RUNS} times; any other error, or the last conflict, is thrown.
 */
export async function runAgainOnConflict<T>(once: () => Promise<T>, conflicted: (err: unknown) => boolean): Promise<T> {
  for (let conflicts = 1; ; conflicts++) {
    try {
      return await once();
    } catch (err) {
      if (!conflicted(err) || conflicts >= MAX_CONFLICT_RUNS) throw err;
      await sleep(Math.random() * CONFLICT_JITTER_MS * conflicts);
    }
  }
}
