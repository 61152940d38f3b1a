import { IdempotencyError } from './idempotency.error';

/** Thrown at bootstrap when the database lacks the library's tables and `migrationsRun` is off. */
export class IdempotencySchemaError extends IdempotencyError {
  readonly code = 'SCHEMA_NOT_MIGRATED';

  constructor(schema: string, missing: string[]) {
    super(
      `nestjs-idempotency: schema "${schema}" is missing migration(s) ${missing.join(', ')}. ` +
        'Set `migrationsRun: true` in IdempotencyModule options, run `npx nestjs-idempotency migrate` (DATABASE_URL, ' +
        `--schema ${schema}), or add IDEMPOTENCY_MIGRATIONS to your DataSource's migrations and run them.`,
    );
    this.name = 'IdempotencySchemaError';
  }
}
