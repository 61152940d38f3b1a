import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import type { ClsService } from 'nestjs-cls';
import type { DataSource, EntityManager } from 'typeorm';
import { IdempotencyConfigError } from '../../errors/idempotency-config.error';
import { LibraryLogger } from '../../observability/library-logger';
import { IdempotencyConnections } from '../../storage/idempotency-connections';
import { loadPeer } from '../../utils/optional-peer';
import { dataSourceOf, registerTransactionHosts, TransactionHostBinder } from './transaction-host-binding';

/**
 * What is used of `@nestjs-cls/transactional`'s TransactionHost. `setTxInstance` is how the plugin itself makes a
 * transaction the active one (its CLS slot, and the `@InjectTransaction()` proxy when enabled); it is not public API,
 * so every binder proves at bootstrap that `tx` then returns the bound manager.
 */
interface TransactionHostLike {
  readonly tx: unknown;
  isTransactionActive(): boolean;
  setTxInstance(tx: unknown): void;
}

/** A TransactionHost found in the app, with the connection name it was registered under. */
interface FoundHost {
  host: TransactionHostLike;
  connection: string;
}

/**
 * The `@nestjs-cls/transactional` adapter. When the app registers `ClsPluginTransactional` with
 * `TransactionalAdapterTypeOrm` on the library's DataSource, the library's transaction (transaction: true, inbox) is
 * also `txHost.tx` of that TransactionHost while the handler runs: repositories written for the plugin join it, and
 * `@Transactional()` methods (default propagation `Required`) reuse it instead of opening their own.
 *
 * The library keeps owning the transaction (it commits it together with the stored outcome, after the handler);
 * the plugin only sees it as the active one. Without the plugin nothing is loaded and nothing changes.
 */
@Injectable()
export class ClsTransactionBridge implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger: Logger = new LibraryLogger('Idempotency');
  private unregister?: () => void;

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly connections: IdempotencyConnections,
  ) {}

  // Synchronous on purpose: registered before any hook of the same phase can start a worker or a listener that
  // opens a transaction (those wait for I/O first).
  onApplicationBootstrap(): void | Promise<void> {
    const hosts = this.typeOrmHosts();
    if (hosts.length === 0) return;
    const library = this.connections.dataSource;
    const joined = hosts.filter((h) => dataSourceOf(h.host.tx as EntityManager) === library);
    if (joined.length === 0) return this.refuseOrWarn(hosts, library);
    const { ClsServiceManager } = loadPeer('nestjs-cls', '@nestjs-cls/transactional (its TransactionHost joins transaction: true)');
    const binder = new ClsHostBinder(ClsServiceManager.getClsService(), joined);
    binder.prove();
    this.unregister = registerTransactionHosts(library, binder);
  }

  onApplicationShutdown(): void {
    this.unregister?.();
  }

  /**
   * No TransactionHost is on the library's DataSource. One on the same database is a misconfiguration (two
   * DataSources where one was meant, so txHost.tx writes would silently miss the library's transaction): refused.
   * Hosts that are all on other databases are a deliberate split (idempotency records kept apart): nothing to join,
   * so the app starts, and the log says that only currentTransaction() commits with the outcome.
   */
  private async refuseOrWarn(hosts: FoundHost[], library: DataSource): Promise<void> {
    const ours = await databaseIdentity(library);
    for (const found of hosts) {
      if ((await databaseIdentity(dataSourceOf(found.host.tx as EntityManager))) === ours) throw mismatch(hosts);
    }
    this.logger.log(
      `@nestjs-cls/transactional's TransactionHost (connection ${hosts.map((h) => `"${h.connection}"`).join(', ')}) is on another database than ` +
        'nestjs-idempotency: txHost.tx is not joined to the library\'s transactions; with transaction: true, only writes through currentTransaction() commit with the outcome',
    );
  }

  /** Every TransactionHost of the app whose adapter is TypeORM's (others, e.g. Prisma's, are not the library's business). */
  private typeOrmHosts(): FoundHost[] {
    const found = new Map<TransactionHostLike, FoundHost>();
    for (const wrapper of this.discovery.getProviders()) {
      // By token first: other providers may be proxies that throw on any property read (nestjs-cls's CLS_REQ).
      const connection = connectionNameOf(wrapper.token);
      if (connection === undefined || !wrapper.isDependencyTreeStatic()) continue;
      const instance: unknown = wrapper.instance;
      if (!isTransactionHost(instance) || found.has(instance) || !isEntityManager(instance.tx)) continue;
      found.set(instance, { host: instance, connection });
    }
    return [...found.values()];
  }
}

/** Binds through nestjs-cls: a nested CLS context (inheriting the request's values) whose transaction slot holds the manager. */
class ClsHostBinder implements TransactionHostBinder {
  constructor(
    private readonly cls: ClsService,
    private readonly hosts: FoundHost[],
  ) {}

  run<T>(manager: EntityManager, work: () => T): T {
    return this.cls.run({ ifNested: 'inherit' }, () => {
      for (const { host } of this.hosts) host.setTxInstance(manager);
      return work();
    });
  }

  /** Fails at startup when this version of the plugin does not see a transaction bound this way. */
  prove(): void {
    const probe = {} as EntityManager;
    const seen = this.run(probe, () => this.hosts.map(({ host }) => host.tx === probe && host.isTransactionActive()));
    const leaked = this.hosts.some(({ host }) => host.tx === probe);
    const blind = this.hosts.filter((_host, i) => !seen[i]);
    if (blind.length === 0 && !leaked) return;
    throw new IdempotencyConfigError([
      `@nestjs-cls/transactional: the TransactionHost of connection ${blind.map((h) => `"${h.connection}"`).join(', ') || '(all)'} did not return ` +
        'the transaction nestjs-idempotency made active (this version of @nestjs-cls/transactional or nestjs-cls keeps it elsewhere, or the app ' +
        'loads two copies of nestjs-cls). Install the versions this library supports (@nestjs-cls/transactional ^3, nestjs-cls ^6.3), once each',
    ], 'Unsupported @nestjs-cls/transactional setup');
  }
}

function mismatch(hosts: FoundHost[]): IdempotencyConfigError {
  const names = hosts.map((h) => `"${h.connection}"`).join(', ');
  return new IdempotencyConfigError([
    `postgres.dataSource: @nestjs-cls/transactional's TransactionalAdapterTypeOrm (connection ${names}) uses another TypeORM DataSource than ` +
      'nestjs-idempotency, so repositories using txHost.tx could not join the library\'s transaction (transaction: true, inbox). ' +
      'Give the library the same DataSource: postgres: { dataSource: \'default\' } (the name of the TypeOrmModule connection the ' +
      'adapter\'s dataSourceToken points at) or the DataSource instance itself',
  ]);
}

/**
 * Which Postgres database a DataSource reaches: its name and the server's start time (a server is not restarted at the
 * same microsecond as another one starts), the same through PgBouncer or a direct connection. Another driver is
 * another database.
 */
async function databaseIdentity(dataSource: DataSource): Promise<string> {
  if (dataSource.options.type !== 'postgres') return `not postgres: ${String(dataSource.options.type)}`;
  const [row] = await dataSource.query<{ db: string; started: string }[]>('SELECT current_database() AS db, pg_postmaster_start_time()::text AS started');
  return `${row.db} @ ${row.started}`;
}

function isTransactionHost(value: unknown): value is TransactionHostLike {
  const v = value as Partial<TransactionHostLike> | null | undefined;
  return typeof v === 'object' && v !== null && typeof v.isTransactionActive === 'function' && typeof v.setTxInstance === 'function' &&
    typeof (v as { withTransaction?: unknown }).withTransaction === 'function' && 'tx' in v;
}

function isEntityManager(value: unknown): value is EntityManager {
  if (typeof value !== 'object' || value === null || typeof (value as EntityManager).getRepository !== 'function') return false;
  const dataSource: DataSource | undefined = dataSourceOf(value as EntityManager);
  return typeof dataSource === 'object' && dataSource !== null;
}

/**
 * The connection name of a TransactionHost's provider token, or undefined for any other token: the plugin registers
 * the default host under the TransactionHost class, a named one under Symbol.for('TransactionHost_<name>').
 */
function connectionNameOf(token: unknown): string | undefined {
  if (typeof token === 'function' && token.name === 'TransactionHost') return 'default';
  if (typeof token === 'symbol' && token.description?.startsWith('TransactionHost_')) return token.description.slice('TransactionHost_'.length);
  return undefined;
}
