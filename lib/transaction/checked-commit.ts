import type { PoolClient } from 'pg';
import type { QueryRunner } from 'typeorm';
import { dataSourceOf } from './cls/transaction-host-binding';
import { inFailedTransaction } from './sql-state';

/** The pg client a connected TypeORM query runner holds. */
export function clientOf(runner: QueryRunner): PoolClient {
  return (runner as unknown as { databaseConnection: PoolClient }).databaseConnection;
}

/**
 * Whether TypeORM has subscribers to tell about the commit: without any, its broadcast is a few promises and
 * microtask turns for nothing, twice per transaction.
 */
export function hasSubscribers(runner: QueryRunner): boolean {
  return dataSourceOf(runner.manager).subscribers.length > 0;
}

/**
 * Commits the transaction of `runner` (a connected TypeORM query runner at depth 1), as TypeORM's commitTransaction
 * does, but reads the COMMIT's answer: when Postgres rolled back instead (a statement had failed and its error was
 * caught), throws `aborted()`.
 */
export async function commitOrThrow(runner: QueryRunner, aborted: () => Error): Promise<void> {
  if (hasSubscribers(runner)) await runner.broadcaster.broadcast('BeforeTransactionCommit');
  const reply = await clientOf(runner).query('COMMIT');
  Object.assign(runner, { isTransactionActive: false, transactionDepth: 0 });
  // Postgres answers the COMMIT of a transaction that a failed statement aborted with a ROLLBACK tag, not an error
  if (reply.command === 'ROLLBACK') throw aborted();
  if (hasSubscribers(runner)) await runner.broadcaster.broadcast('AfterTransactionCommit');
}

/**
 * Remembers the error of the statement that aborted a transaction on `runner`: the newest failure of a statement
 * run through it, other than those refused because the transaction was aborted already (25P02).
 */
export function watchFailedStatements(runner: QueryRunner): { readonly failure: unknown } {
  const watch: { failure: unknown } = { failure: undefined };
  const query = runner.query.bind(runner) as (...args: unknown[]) => Promise<unknown>;
  (runner as unknown as { query: (...args: unknown[]) => Promise<unknown> }).query = async (...args: unknown[]) => {
    try {
      return await query(...args);
    } catch (err) {
      if (!inFailedTransaction(err)) watch.failure = err;
      throw err;
    }
  };
  return watch;
}
