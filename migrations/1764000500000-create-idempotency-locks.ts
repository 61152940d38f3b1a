import { MigrationInterface, QueryRunner } from 'typeorm';

function schemaOf(queryRunner: QueryRunner): string {
  const options = queryRunner.connection.options as { schema?: string };
  return `"${(options.schema ?? 'public').replace(/"/g, '""')}"`;
}

/**
 * Creates the lease rows that let one instance at a time run retention and the workflow reconciler without a
 * session advisory lock (which needs a connection held for the whole pass and breaks behind PgBouncer).
 */
export class CreateIdempotencyLocks1764000500000 implements MigrationInterface {
  name = 'CreateIdempotencyLocks1764000500000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const schema = schemaOf(queryRunner);
    await queryRunner.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS ${schema}."idempotency_locks" (
        name          text        PRIMARY KEY,
        holder        uuid        NOT NULL,
        locked_until  timestamptz NOT NULL
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE IF EXISTS ${schemaOf(queryRunner)}."idempotency_locks"`);
  }
}
