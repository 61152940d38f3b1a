import { AsyncLocalStorage } from 'node:async_hooks';
import type { EntityManager } from 'typeorm';
import { NotInTransactionError } from '../errors/not-in-transaction.error';
import { joinTransactionHosts } from './cls/transaction-host-binding';

const storage = new AsyncLocalStorage<EntityManager>();

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

/** Runs `work` with `manager` as the current transaction (internal); also `txHost.tx` where @nestjs-cls/transactional is set up. */
export function withTransaction<T>(manager: EntityManager, work: () => T): T {
  return storage.run(manager, () => joinTransactionHosts(manager, work));
}
