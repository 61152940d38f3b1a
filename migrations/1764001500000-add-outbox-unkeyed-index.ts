import { MigrationInterface, QueryRunner } from 'typeorm';

function schemaOf(queryRunner: QueryRunner): string {
  const options = queryRunner.connection.options as { schema?: string };
  return `"${(options.schema ?? 'public').replace(/"/g, '""')}"`;
}

/**
 * Indexes the pending messages without a key in publish order. The relay claims keyed messages by walking the
 * undelivered head of each key (index `outbox_messages_open_key`) and unkeyed ones through this index, so a claim
 * never scans the whole pending backlog.
 */
export class AddOutboxUnkeyedIndex1764001500000 implements MigrationInterface {
  name = 'AddOutboxUnkeyedIndex1764001500000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE INDEX IF NOT EXISTS "outbox_messages_pending_unkeyed" ON ${schemaOf(queryRunner)}."outbox_messages" (seq) WHERE status = 'pending' AND key IS NULL`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX IF EXISTS ${schemaOf(queryRunner)}."outbox_messages_pending_unkeyed"`);
  }
}
