import type { DataSource, DataSourceOptions } from 'typeorm';
import { loadPeer } from '../../utils/optional-peer';
import { IDEMPOTENCY_MIGRATION_CLASSES, IDEMPOTENCY_MIGRATIONS_TABLE } from '../../../migrations';
import { recordedMigrations } from '../../../migrations/recorded-migrations';
import { quoteIdent } from './idempotency.sql';

/** What a migration run or check found. */
export interface SchemaState {
  /** Migrations applied by this call. */
  applied: string[];
  /** Migrations the schema still lacks (always empty after a run). */
  pending: string[];
}

/**
 * Opens a short-lived single-connection DataSource on the given connection options, for `schema`, runs `work`
 * and closes it. Options of the app's own DataSource can be passed: entities, subscribers and its migrations are dropped.
 */
export async function withMigrationConnection<T>(connection: object, schema: string, work: (dataSource: DataSource) => Promise<T>): Promise<T> {
  const { DataSource } = loadPeer('typeorm', 'postgres');
  const dataSource = new DataSource({
    ...(connection as { type: 'postgres' }),
    name: undefined,
    schema,
    entities: [],
    subscribers: [],
    migrations: [],
    synchronize: false,
    migrationsRun: false,
    logging: false,
    poolSize: 1,
  } as DataSourceOptions);
  await dataSource.initialize();
  try {
    return await work(dataSource);
  } finally {
    await dataSource.destroy();
  }
}

/** The library's migrations the schema lacks, wherever TypeORM recorded the others (the library's table or the app's). */
export async function pendingMigrations(dataSource: DataSource, schema: string): Promise<string[]> {
  const names = IDEMPOTENCY_MIGRATION_CLASSES.map((m) => new m().name ?? m.name);
  const recorded = await recordedMigrations((text, values) => dataSource.query(text, values), schema, names);
  return names.filter((name) => !recorded.has(name));
}

/**
 * Applies the pending migrations in ONE transaction that first takes a transaction-scoped advisory lock: instances
 * booting at once wait for each other and then find nothing to do, a crash rolls everything back, and nothing
 * outlives the transaction (so it is safe behind PgBouncer in transaction pooling). Each applied migration is
 * recorded in `idempotency_migrations` (TypeORM's layout, so TypeORM's own CLI reads it too).
 */
export async function runMigrations(dataSource: DataSource, schema: string): Promise<SchemaState> {
  const runner = dataSource.createQueryRunner();
  await runner.connect();
  const schemaName = quoteIdent(schema);
  const ledger = `${schemaName}.${quoteIdent(IDEMPOTENCY_MIGRATIONS_TABLE)}`;
  try {
    await runner.startTransaction();
    await runner.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`nestjs-idempotency:migrations:${schema}`]);
    await runner.query(`CREATE SCHEMA IF NOT EXISTS ${schemaName}`);
    await runner.query(`CREATE TABLE IF NOT EXISTS ${ledger} (id SERIAL PRIMARY KEY, "timestamp" bigint NOT NULL, name varchar NOT NULL)`);
    const migrations = IDEMPOTENCY_MIGRATION_CLASSES.map((m) => new m());
    const names = migrations.map((m, i) => m.name ?? IDEMPOTENCY_MIGRATION_CLASSES[i].name);
    const recorded = await recordedMigrations((text, values) => runner.query(text, values), schema, names);
    const applied: string[] = [];
    for (const [i, migration] of migrations.entries()) {
      if (recorded.has(names[i])) continue;
      await migration.up(runner);
      await runner.query(`INSERT INTO ${ledger} ("timestamp", name) VALUES ($1, $2)`, [Number(names[i].slice(-13)), names[i]]);
      applied.push(names[i]);
    }
    await runner.commitTransaction();
    return { applied, pending: [] };
  } catch (err) {
    if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
    throw err;
  } finally {
    await runner.release();
  }
}
