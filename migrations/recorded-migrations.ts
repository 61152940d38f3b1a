import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Runs one query; both a TypeORM QueryRunner and a DataSource fit. */
export type Query = (text: string, values?: unknown[]) => Promise<unknown>;

/**
 * The names among `names` that any TypeORM migrations table in `schema` records: the library's own
 * (`idempotency_migrations`) or the app's (`migrations`, or whatever its DataSource calls it), found by its
 * shape (`timestamp` and `name` columns). So the schema is up to date however it was migrated: by the module,
 * by the CLI, or by the app's own DataSource with `IDEMPOTENCY_MIGRATIONS` in its list.
 */
export async function recordedMigrations(query: Query, schema: string, names: string[]): Promise<Set<string>> {
  const tables = (await query(
    `SELECT table_name FROM information_schema.columns
      WHERE table_schema = $1 AND column_name IN ('timestamp', 'name')
      GROUP BY table_name HAVING count(*) = 2`,
    [schema],
  )) as { table_name: string }[];
  const found = new Set<string>();
  for (const { table_name } of tables) {
    const table = `"${schema.replace(/"/g, '""')}"."${table_name.replace(/"/g, '""')}"`;
    const rows = (await query(`SELECT DISTINCT name::text AS name FROM ${table} WHERE name::text = ANY($1::text[])`, [names])) as { name: string }[];
    for (const row of rows) found.add(row.name);
  }
  return found;
}

/** The schema a migration writes to: its DataSource's, else `public`. */
export function migrationSchema(queryRunner: QueryRunner): string {
  return (queryRunner.connection.options as { schema?: string }).schema ?? 'public';
}

type MigrationClass = new () => MigrationInterface;

/**
 * The same migration, skipped when a migrations table in its schema already records it: the app's DataSource can
 * list `IDEMPOTENCY_MIGRATIONS` even after the module or the CLI applied them, and TypeORM then only records them.
 */
export function skipWhenRecorded<T extends MigrationClass>(migration: T): T {
  const Guarded = class extends (migration as MigrationClass) {
    override async up(queryRunner: QueryRunner): Promise<void> {
      const name = this.name ?? migration.name;
      const recorded = await recordedMigrations((text, values) => queryRunner.query(text, values), migrationSchema(queryRunner), [name]);
      if (!recorded.has(name)) await super.up(queryRunner);
    }
  };
  Object.defineProperty(Guarded, 'name', { value: migration.name });
  return Guarded as unknown as T;
}
