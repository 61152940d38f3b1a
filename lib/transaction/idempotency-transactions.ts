import type { EntityManager } from 'typeorm';
import type { Claim, CompletedRecord } from '../core/idempotency-record';
import type { TransactionIsolation } from './transaction-options';

/** A transaction the library opened for a handler: its writes and the claim's completion commit together. */
export interface OpenTransaction {
  /** What `currentTransaction()` returns inside it. */
  readonly manager: EntityManager;
  /** A savepoint inside another transaction of the library: nothing is durable before that one commits. */
  readonly nested: boolean;
  /** Runs a statement in the transaction and returns its rows. */
  query<R>(text: string, values: unknown[]): Promise<R[]>;
  /** Completion by compare-and-set on the claim's token, inside this transaction; null when the claim was taken over. */
  complete(claim: Claim, result: unknown): Promise<CompletedRecord | null>;
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
}
