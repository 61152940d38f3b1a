import { setTimeout as sleep } from 'node:timers/promises';
import { StoreUnavailableError } from '../errors/store-unavailable.error';
import { sqlState } from './sql-state';

/** Runs of a transaction that Postgres aborted for a conflict, at most (the last conflict is then thrown). */
export const MAX_CONFLICT_RUNS = 10;
/** Each run after a conflict waits a random part of this many ms times the conflicts so far, so the two sides part. */
const CONFLICT_JITTER_MS = 10;

const SERIALIZATION_FAILURE = '40001';
const DEADLOCK_DETECTED = '40P01';

/**
 * Postgres's error for a serialization failure or a deadlock (as pg raised it, or as TypeORM's QueryFailedError wraps
 * it): the transaction it came from is aborted, and running it again may succeed. An error of the app's own that
 * merely carries such a `code` is not one.
 */
export function isConflict(err: unknown): boolean {
  const code = sqlState(err);
  return (code === SERIALIZATION_FAILURE || code === DEADLOCK_DETECTED) && fromPostgres(err);
}

/** Postgres's errors, and only they, come with a `severity` (pg's DatabaseError, under TypeORM as `driverError`). */
function fromPostgres(err: unknown): boolean {
  const e = err as { severity?: unknown; driverError?: { severity?: unknown } } | null;
  return typeof (e?.driverError?.severity ?? e?.severity) === 'string';
}

/**
 * The library's own ending of a transaction (the completion and its COMMIT) failed for a conflict: the store error it
 * was reported as wraps it. One at the claim never leaves the engine (the claim is tried again there).
 */
export function isConflictOfOurs(err: unknown): boolean {
  return err instanceof StoreUnavailableError && isConflict(err.cause);
}

/** The work's conflicts that were found to have aborted the library's transaction (see {@link markAbortedForConflict}). */
const abortedTransactions = new WeakSet<object>();

/**
 * Records whether `err`, thrown by the work, aborted the library's transaction (which was then rolled back). The
 * outermost transaction decides: a nested call's savepoint rolled back leaves the outer transaction usable, and
 * there `err` is the work's failure.
 */
export function markAbortedForConflict(err: unknown, aborted: boolean): void {
  if (typeof err !== 'object' || err === null) return;
  if (aborted) abortedTransactions.add(err);
  else abortedTransactions.delete(err);
}

/**
 * Postgres aborted a transaction of the library for a conflict, under the work's own statement (its error, as the work
 * threw it, once marked) or at the library's completion or COMMIT: either way nothing of it committed, and running it
 * again is Postgres's advice.
 */
export function abortedForConflict(err: unknown): boolean {
  return isConflictOfOurs(err) || (typeof err === 'object' && err !== null && abortedTransactions.has(err));
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
