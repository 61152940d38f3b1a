import { MigrationInterface, QueryRunner } from 'typeorm';

function schemaOf(queryRunner: QueryRunner): string {
  const options = queryRunner.connection.options as { schema?: string };
  return `"${(options.schema ?? 'public').replace(/"/g, '""')}"`;
}

/**
 * Indexes the failed records by key, newest failure last. A duplicate that waited for a holder which then failed
 * reads that failure back (`onDuplicate: 'wait'`, and the transactional mode's waiters), and failed records are outside
 * the partial unique index on active keys: without this one, that read scanned the whole records table.
 */
export class IndexFailedRecords1764001900000 implements MigrationInterface {
  name = 'IndexFailedRecords1764001900000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE INDEX IF NOT EXISTS "idempotency_records_failed" ON ${schemaOf(queryRunner)}."idempotency_records" (scope, key, completed_at) WHERE status = 'failed'`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX IF EXISTS ${schemaOf(queryRunner)}."idempotency_records_failed"`);
  }
}
