import { AsyncLocalStorage } from 'node:async_hooks';
import type { EntityManager } from 'typeorm';
import { NotInTransactionError } from '../errors/not-in-transaction.error';
import { joinTransactionHosts } from './cls/transaction-host-binding';

const storage = new AsyncLocalStorage<EntityManager>();
/**
 * How many `withTransaction()` calls are running. While none is, `storage` is disabled: on Node 20 an enabled
 * AsyncLocalStorage makes Node run a promise hook for every promise of the process, so one transactional route
 * would otherwise tax every later request of the app (replays, other routes) for good. `run()` enables it again.
 */
let running = 0;

function finished(): void {
  if (--running === 0) storage.disable();
}

/**
 * The TypeORM EntityManager of the transaction the current handler, method, step or inbox handler runs in:
 * its writes commit together with the stored outcome, or not at all. Throws {@link NotInTransactionError}
 * outside such a transaction.
 */
export function currentTransaction(): EntityManager {
  const manager = storage.getStore();
  if (!manager) throw new NotInTransactionError();
  return manager;
}

/** The current transaction's EntityManager, or undefined outside one (internal). */
export function activeTransaction(): EntityManager | undefined {
  return storage.getStore();
}

/** How many `withTransaction()` calls are running (for tests). */
export function transactionsRunning(): number {
  return running;
}

/**
 * Runs `work` with `manager` as the current transaction (internal); also `txHost.tx` where @nestjs-cls/transactional
 * is set up. The transaction is current until `work` (or the promise it returns) settles, not after.
 */
export function withTransaction<T>(manager: EntityManager, work: () => T): T {
  running++;
  let result: T;
  try {
    result = storage.run(manager, () => joinTransactionHosts(manager, work));
  } catch (err) {
    finished();
    throw err;
  }
  if (isThenable(result)) {
    // The same promise is handed back (its identity and rejection stay the caller's); this branch only counts.
    result.then(finished, finished);
    return result;
  }
  finished();
  return result;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (typeof value === 'object' || typeof value === 'function') && value !== null && typeof (value as { then?: unknown }).then === 'function';
}
