import { MigrationInterface, QueryRunner } from 'typeorm';

function schemaOf(queryRunner: QueryRunner): string {
  const options = queryRunner.connection.options as { schema?: string };
  return options.schema ?? 'public';
}

function q(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * Creates the idempotency record table with the status-filtered partial unique index on (scope, key):
 * rows in failed, cancelled or timed_out do not block a new claim of the same key.
 */
export class CreateIdempotencyRecords1732250000000 implements MigrationInterface {
  name = 'CreateIdempotencyRecords1732250000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const schema = q(schemaOf(queryRunner));
    const table = `${schema}."idempotency_records"`;
    await queryRunner.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await queryRunner.query(`
      CREATE TABLE ${table} (
        id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        scope         text        NOT NULL,
        key           text        NOT NULL,
        fingerprint   text        NOT NULL,
        status        text        NOT NULL CHECK (status IN ('in_progress', 'completed', 'failed', 'cancelled', 'timed_out')),
        lease_token   uuid,
        locked_until  timestamptz,
        expires_at    timestamptz NOT NULL,
        attempts      integer     NOT NULL DEFAULT 1,
        result        jsonb,
        error         jsonb,
        created_at    timestamptz NOT NULL DEFAULT now(),
        completed_at  timestamptz
      )`);
    await queryRunner.query(`
      CREATE UNIQUE INDEX "idempotency_records_active_key" ON ${table} (scope, key)
      WHERE status NOT IN ('failed', 'cancelled', 'timed_out')`);
    await queryRunner.query(`CREATE INDEX "idempotency_records_expires_at" ON ${table} (expires_at)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const schema = q(schemaOf(queryRunner));
    await queryRunner.query(`DROP TABLE IF EXISTS ${schema}."idempotency_records"`);
  }
}
