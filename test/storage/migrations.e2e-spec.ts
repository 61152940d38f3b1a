import { Body, Controller, INestApplication, Post } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import request from 'supertest';
import { DataSource, MigrationInterface, QueryRunner } from 'typeorm';
import { IDEMPOTENCY_MIGRATIONS, IdempotencyModule, IdempotencyModuleOptions, IdempotencySchemaError } from '../../lib';
import { IDEMPOTENCY_MIGRATION_CLASSES, IDEMPOTENCY_MIGRATIONS_TABLE } from '../../migrations';
import { databaseUrl, sql, uniqueSchema } from '../support/test-app';
import { nodeEntry } from '../support/node-entry';

const ROOT = join(__dirname, '..', '..');
const ALL = IDEMPOTENCY_MIGRATION_CLASSES.map((m) => m.name);
const PREVIOUS_RELEASE = IDEMPOTENCY_MIGRATION_CLASSES.slice(0, 3);
const TABLES = ['idempotency_records', 'inbox_messages', 'workflow_executions', 'workflow_steps', 'idempotency_locks', 'outbox_messages', 'idempotency_schedules'];

let runs = 0;
@Controller()
class ChargeController {
  @Post('charge')
  charge(@Body() body: { amount: number }) {
    runs++;
    return { run: runs, amount: body.amount };
  }
}

/** An app migration of its own, listed beside the library's. */
class CreateOrders1700000000000 implements MigrationInterface {
  name = 'CreateOrders1700000000000';
  async up(queryRunner: QueryRunner): Promise<void> {
    const schema = (queryRunner.connection.options as { schema?: string }).schema ?? 'public';
    await queryRunner.query(`CREATE TABLE "${schema}".orders (id serial PRIMARY KEY)`);
  }
  async down(): Promise<void> {}
}

/** The app's own DataSource with the library's migrations in its list, as the README tells users to do. */
function appDataSource(schema: string, migrations: (new () => MigrationInterface)[] = IDEMPOTENCY_MIGRATIONS): DataSource {
  return new DataSource({ type: 'postgres', url: databaseUrl(), schema, migrations: [CreateOrders1700000000000, ...migrations], logging: false });
}

async function runAppMigrations(schema: string, migrations?: (new () => MigrationInterface)[]): Promise<string[]> {
  await sql(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
  const ds = await appDataSource(schema, migrations).initialize();
  try {
    return (await ds.runMigrations()).map((m) => m.name);
  } finally {
    await ds.destroy();
  }
}

/** The schema as the previous release left it: its three migrations, applied by TypeORM into idempotency_migrations. */
async function previousRelease(schema: string): Promise<void> {
  await sql(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
  const ds = await new DataSource({
    type: 'postgres', url: databaseUrl(), schema, migrations: PREVIOUS_RELEASE, migrationsTableName: IDEMPOTENCY_MIGRATIONS_TABLE, logging: false,
  }).initialize();
  try {
    await ds.runMigrations({ transaction: 'each' });
  } finally {
    await ds.destroy();
  }
  await sql(`INSERT INTO "${schema}".idempotency_records (scope, key, fingerprint, status, result, expires_at, completed_at)
             VALUES ('old', 'kept', 'f', 'completed', '{"kept":true}', now() + interval '1 hour', now())`);
}

async function boot(imports: unknown[]): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({ imports: imports as never[], controllers: [ChargeController] }).compile();
  const app = moduleRef.createNestApplication();
  app.useLogger(false);
  await app.init();
  return app;
}

function moduleWith(schema: string, extra: Partial<IdempotencyModuleOptions>) {
  return IdempotencyModule.forRoot({ postgres: { url: databaseUrl(), schema }, redis: false, ...extra });
}

async function expectWorking(app: INestApplication, key: string): Promise<void> {
  const first = await request(app.getHttpServer()).post('/charge').set('Idempotency-Key', key).send({ amount: 1 });
  const again = await request(app.getHttpServer()).post('/charge').set('Idempotency-Key', key).send({ amount: 1 });
  expect(first.status).toBe(201);
  expect(again.headers['idempotent-replayed']).toBe('true');
  expect(again.text).toBe(first.text);
}

async function tables(schema: string): Promise<string[]> {
  const rows = await sql<{ table_name: string }>(
    'SELECT table_name FROM information_schema.tables WHERE table_schema = $1 AND table_name = ANY($2) ORDER BY table_name', [schema, TABLES]);
  return rows.map((r) => r.table_name);
}

async function recorded(schema: string, table: string): Promise<string[]> {
  return (await sql<{ name: string }>(`SELECT name FROM "${schema}"."${table}" ORDER BY id`)).map((r) => r.name);
}

function cli(args: string[], env: Record<string, string | undefined> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [...nodeEntry(join(ROOT, 'lib', 'cli', 'nestjs-idempotency.ts')), ...args],
      { cwd: ROOT, env: { ...process.env, DATABASE_URL: undefined, IDEMPOTENCY_SCHEMA: undefined, ...env } },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const dropSchemas: string[] = [];
function fresh(prefix: string): string {
  const schema = uniqueSchema(prefix);
  dropSchemas.push(schema);
  return schema;
}
afterAll(async () => {
  for (const schema of dropSchemas) await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
});

describe('migrations: the module runs them (migrationsRun: true)', () => {
  it('from an empty database', async () => {
    const schema = fresh('mig');
    const app = await boot([moduleWith(schema, { migrationsRun: true })]);
    try {
      await expectWorking(app, 'empty');
      expect(await tables(schema)).toEqual([...TABLES].sort());
      expect(await recorded(schema, IDEMPOTENCY_MIGRATIONS_TABLE)).toEqual(ALL);
    } finally {
      await app.close();
    }
  });

  it('when the app\'s own migrations already created the tables', async () => {
    const schema = fresh('mig');
    expect(await runAppMigrations(schema)).toEqual(['CreateOrders1700000000000', ...ALL]);
    const app = await boot([moduleWith(schema, { migrationsRun: true })]);
    try {
      await expectWorking(app, 'after-app');
    } finally {
      await app.close();
    }
  });

  it('upgrades the previous release\'s schema in place, keeping its records', async () => {
    const schema = fresh('mig');
    await previousRelease(schema);
    const app = await boot([moduleWith(schema, { migrationsRun: true })]);
    try {
      await expectWorking(app, 'upgraded');
      expect(await recorded(schema, IDEMPOTENCY_MIGRATIONS_TABLE)).toEqual(ALL);
      expect(await sql(`SELECT result FROM "${schema}".idempotency_records WHERE key = 'kept'`)).toEqual([{ result: { kept: true } }]);
    } finally {
      await app.close();
    }
  });

  it('when several instances boot at once on an empty schema, each starts', async () => {
    const schema = fresh('mig');
    const apps = await Promise.all([1, 2, 3].map(() => boot([moduleWith(schema, { migrationsRun: true })])));
    try {
      await expectWorking(apps[2], 'concurrent');
      expect(await recorded(schema, IDEMPOTENCY_MIGRATIONS_TABLE)).toEqual(ALL);
    } finally {
      await Promise.all(apps.map((a) => a.close()));
    }
  });
});

describe('migrations: the app\'s own TypeORM migrations include IDEMPOTENCY_MIGRATIONS', () => {
  it('from an empty database, TypeOrmModule with migrationsRun, the module only verifying (migrationsRun: false)', async () => {
    const schema = fresh('mig');
    await sql(`CREATE SCHEMA "${schema}"`);
    const app = await boot([
      TypeOrmModule.forRoot({
        type: 'postgres', url: databaseUrl(), schema, migrations: [CreateOrders1700000000000, ...IDEMPOTENCY_MIGRATIONS], migrationsRun: true,
      }),
      IdempotencyModule.forRoot({ postgres: { dataSource: 'default' }, redis: false }),
    ]);
    try {
      await expectWorking(app, 'app-owned');
      expect(await recorded(schema, 'migrations')).toEqual(['CreateOrders1700000000000', ...ALL]);
    } finally {
      await app.close();
    }
  });

  it('from an empty database, both TypeOrmModule and the module with migrationsRun: true', async () => {
    const schema = fresh('mig');
    await sql(`CREATE SCHEMA "${schema}"`);
    const app = await boot([
      TypeOrmModule.forRoot({
        type: 'postgres', url: databaseUrl(), schema, migrations: [CreateOrders1700000000000, ...IDEMPOTENCY_MIGRATIONS], migrationsRun: true,
      }),
      IdempotencyModule.forRoot({ postgres: { dataSource: 'default' }, redis: false, migrationsRun: true }),
    ]);
    try {
      await expectWorking(app, 'both-run');
    } finally {
      await app.close();
    }
  });

  it('when the module already created the tables, the app\'s run records them without re-creating', async () => {
    const schema = fresh('mig');
    const app = await boot([moduleWith(schema, { migrationsRun: true })]);
    await expectWorking(app, 'module-first');
    await app.close();
    expect(await runAppMigrations(schema)).toEqual(['CreateOrders1700000000000', ...ALL]);
    expect(await recorded(schema, 'migrations')).toEqual(['CreateOrders1700000000000', ...ALL]);
    const again = await boot([moduleWith(schema, { migrationsRun: false })]);
    try {
      await expectWorking(again, 'module-first-2');
    } finally {
      await again.close();
    }
  });

  it('upgrades the previous release\'s schema in place', async () => {
    const schema = fresh('mig');
    await previousRelease(schema);
    expect(await runAppMigrations(schema)).toEqual(['CreateOrders1700000000000', ...ALL]);
    expect(await tables(schema)).toEqual([...TABLES].sort());
  });

  it('a schema without them fails at bootstrap, naming what is missing and how to migrate', async () => {
    const schema = fresh('mig');
    await previousRelease(schema);
    const failed = boot([moduleWith(schema, { migrationsRun: false })]);
    await expect(failed).rejects.toThrow(IdempotencySchemaError);
    await expect(failed).rejects.toThrow(/CreateIdempotencyLocks1764000500000.*npx nestjs-idempotency migrate/);
  });
});

describe('migrations: the CLI (npx nestjs-idempotency migrate), as a real process', () => {
  it('from an empty database: --check fails listing all, migrate applies, --check passes, the module boots verifying', async () => {
    const schema = fresh('mig');
    const check = await cli(['migrate', '--check', '--schema', schema], { DATABASE_URL: databaseUrl() });
    expect(check.code).toBe(1);
    for (const name of ALL) expect(check.stderr).toContain(name);
    const run = await cli(['migrate', `--url=${databaseUrl()}`], { IDEMPOTENCY_SCHEMA: schema });
    expect(run).toMatchObject({ code: 0 });
    expect(run.stdout).toContain(`applied to schema "${schema}"`);
    expect(await cli(['migrate', '--check', '--url', databaseUrl(), '--schema', schema])).toMatchObject({ code: 0, stdout: `schema "${schema}" is up to date\n` });
    const app = await boot([moduleWith(schema, { migrationsRun: false })]);
    try {
      await expectWorking(app, 'cli');
    } finally {
      await app.close();
    }
  });

  it('on tables the app\'s migrations created, and on the previous release\'s schema', async () => {
    const appMigrated = fresh('mig');
    await runAppMigrations(appMigrated);
    expect(await cli(['migrate', '--schema', appMigrated], { DATABASE_URL: databaseUrl() }))
      .toMatchObject({ code: 0, stdout: `schema "${appMigrated}" is up to date\n` });
    const previous = fresh('mig');
    await previousRelease(previous);
    expect((await cli(['migrate', '--check', '--schema', previous], { DATABASE_URL: databaseUrl() })).code).toBe(1);
    expect(await cli(['migrate', '--schema', previous], { DATABASE_URL: databaseUrl() }))
      .toMatchObject({ code: 0, stdout: `applied to schema "${previous}": StepJournal1764000100000, AddWorkflowResultWaiters1764000200000, CreateIdempotencyLocks1764000500000, CreateOutboxMessages1764000800000, WorkflowWaits1764001400000, WorkflowWaitCalls1764001400100, AddOutboxUnkeyedIndex1764001500000, TaskExecutions1764001700000, CreateSchedules1764001800000, IndexFailedRecords1764001900000\n` });
    expect(await tables(previous)).toEqual([...TABLES].sort());
  });

  it('refuses a missing database URL or an unknown option with usage and exit code 2', async () => {
    const noUrl = await cli(['migrate']);
    expect(noUrl.code).toBe(2);
    expect(noUrl.stderr).toMatch(/--url postgres:\/\/… or in DATABASE_URL/);
    expect((await cli(['migrate', '--schmea', 'x'], { DATABASE_URL: databaseUrl() })).code).toBe(2);
    expect((await cli(['upgrade'], { DATABASE_URL: databaseUrl() })).code).toBe(2);
  });
});

describe('the CLI ships as the package bin', () => {
  it('points at the compiled entry point, which starts with a node shebang', () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const pkg = require('../../package.json') as { bin: Record<string, string>; files: string[] };
    expect(pkg.bin['nestjs-idempotency']).toBe('dist/lib/cli/nestjs-idempotency.js');
    expect(pkg.files).toContain('dist/lib');
    expect(readFileSync(join(ROOT, 'lib', 'cli', 'nestjs-idempotency.ts'), 'utf8').startsWith('#!/usr/bin/env node\n')).toBe(true);
  });
});
