import type { QueryResultRow } from 'pg';
import type { EntityManager } from 'typeorm';
import type { Claim, ClaimRequest, CompletedRecord } from '../core/idempotency-record';
import type { NamedStatement } from '../storage/postgres/statements';
import type { ClaimAttempt } from './claim-statement';
import type { InlineStatement } from './inline-statement';
import type { TransactionIsolation } from './transaction-options';

/** A transaction the library opened for a handler: its writes and the claim's completion commit together. */
export interface OpenTransaction {
  /** What `currentTransaction()` returns inside it. */
  readonly manager: EntityManager;
  /**
   * The error of the work's statement that aborted the transaction (the newest one that failed through `manager`),
   * if any: what a work that caught it and returned is told about (see TransactionAbortedError).
   */
  readonly abortedBy: unknown;
  /** Runs a statement in the transaction and returns its rows. */
  query<R>(text: string, values: unknown[]): Promise<R[]>;
  /**
   * Ends the transaction with the claim's outcome: rolls the work's writes back to the savepoint after the claim
   * when `undoWork`, stores `result` by compare-and-set on the claim's token, and commits — in ONE round trip where
   * the transaction is the library's own. Null when the claim was taken over: nothing is committed then. Throws
   * when Postgres fails; either way the transaction is over and its connection back in the pool.
   */
  completeAndCommit(claim: Claim, result: unknown, undoWork: boolean): Promise<CompletedRecord | null>;
  /** Like {@link completeAndCommit}, but marks the claim failed (with `error`): the key is free once it commits. */
  releaseAndCommit(claim: Claim, error: unknown, undoWork: boolean): Promise<void>;
  /**
   * Runs `statements`, then commits, in one round trip where the transaction is the library's own; resolves each
   * statement's rows. A statement that fails rolls everything back (the COMMIT is never run) and is thrown.
   */
  commitAfter(statements: InlineStatement[], options?: { undoWork?: boolean }): Promise<QueryResultRow[][]>;
  /** The error of the newest claim on the key released within `withinMs` and committed, if any. */
  recentFailure(scope: string, key: string, withinMs: number): Promise<unknown>;
  /**
   * Shows the server the holder is alive: a transaction idle longer than its claim's lease is ended by the server
   * (a hung holder frees its key), so a live holder waiting on something else calls this every third of it.
   */
  ping(): Promise<void>;
  /** Commits; the connection goes back to the pool whatever happens. */
  commit(): Promise<void>;
  /** Rolls back and gives the connection back; never throws (a broken connection is discarded). */
  rollback(): Promise<void>;
}

/**
 * Opens the transactions of the transactional mode. Bound only where the store is Postgres: without it,
 * `transaction: true` is refused at startup.
 */
export abstract class IdempotencyTransactions {
  /**
   * Opens a transaction on a connection of its own, or a savepoint inside `outer` when the call is nested in another
   * transaction of the library (then `isolation` is the outer one's). Waits at most `acquireWithinMs` for a free
   * connection, then throws StoreUnavailableError.
   */
  abstract begin(isolation: TransactionIsolation, acquireWithinMs: number, outer?: EntityManager): Promise<OpenTransaction>;

  /**
   * Like {@link begin}, with the claim of `claim.request` (under `claim.token`) as the transaction's first statement
   * (one commit: the claim becomes visible with the work's writes and its outcome), and a savepoint after it where
   * the work starts. The claim waits at most `claim.waitMs` for another uncommitted claim of the key ('lock
   * timeout'); with `waitMs` 0 it does not wait for one ('held'), and any other lock it waits for longer than
   * `acquireWithinMs` throws StoreUnavailableError. The bound does not apply to the statements after the claim.
   * Whatever the outcome, the transaction stays
   * open for the caller to use or roll back; an error rolls it back and is thrown. One round trip.
   */
  abstract beginWithClaim(
    isolation: TransactionIsolation, acquireWithinMs: number, outer: EntityManager | undefined,
    claim: { request: ClaimRequest; token: string; waitMs: number },
  ): Promise<{ tx: OpenTransaction; outcome: ClaimAttempt }>;

  /**
   * Like {@link begin} on a connection of its own, but its START TRANSACTION goes to Postgres with the transaction's
   * first statement, in that statement's round trip (the work's own, or the one {@link OpenTransaction.commitAfter}
   * sends); ended before any statement, it costs Postgres nothing. `prepare`: as for {@link beginWith}. For work that
   * needs to read nothing before it runs (a claim must come first, so the claiming faces cannot use it).
   */
  abstract beginOnFirstStatement(isolation: TransactionIsolation, acquireWithinMs: number, prepare?: NamedStatement[]): Promise<OpenTransaction>;

  /**
   * Like {@link begin} on a connection of its own, with `first` as the transaction's first statement in the same
   * round trip; resolves its rows. `prepare`: statements to prepare on a new connection before the transaction
   * starts, for {@link OpenTransaction.commitAfter} later. An error of `first` rolls back and is thrown.
   */
  abstract beginWith(
    isolation: TransactionIsolation, acquireWithinMs: number, first: InlineStatement, prepare?: NamedStatement[],
  ): Promise<{ tx: OpenTransaction; rows: QueryResultRow[] }>;
}
