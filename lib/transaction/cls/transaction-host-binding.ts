import type { DataSource, EntityManager } from 'typeorm';

/** Makes an EntityManager the active transaction of the plugin's TransactionHosts while some work runs. */
export interface TransactionHostBinder {
  run<T>(manager: EntityManager, work: () => T): T;
}

// Keyed by the DataSource the binder was checked against at bootstrap: `withTransaction()` is a free function called
// by every face (and by several apps in one process, each with its own DataSource), so it finds its binder through
// the transaction's own DataSource rather than through a global switch.
const binders = new WeakMap<DataSource, TransactionHostBinder>();

/** Binds the transactions of `dataSource` into the plugin from now on; returns the undo (for shutdown). */
export function registerTransactionHosts(dataSource: DataSource, binder: TransactionHostBinder): () => void {
  binders.set(dataSource, binder);
  return () => {
    if (binders.get(dataSource) === binder) binders.delete(dataSource);
  };
}

/**
 * Runs `work` with `manager` as `txHost.tx` of every `@nestjs-cls/transactional` TransactionHost bound to its
 * DataSource; without the plugin, just runs it.
 */
export function joinTransactionHosts<T>(manager: EntityManager, work: () => T): T {
  const binder = binders.get(dataSourceOf(manager));
  return binder ? binder.run(manager, work) : work();
}

/** The DataSource an EntityManager belongs to (`dataSource` on TypeORM 1.x, `connection` on 0.3.x). */
export function dataSourceOf(manager: EntityManager): DataSource {
  const m = manager as unknown as { dataSource?: DataSource; connection?: DataSource };
  return (m.dataSource ?? m.connection) as DataSource;
}
