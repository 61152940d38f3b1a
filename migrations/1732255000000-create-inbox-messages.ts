import { MigrationInterface, QueryRunner } from 'typeorm';

function schemaOf(queryRunner: QueryRunner): string {
  const options = queryRunner.connection.options as { schema?: string };
  return `"${(options.schema ?? 'public').replace(/"/g, '""')}"`;
}

/** Creates the inbox: one row per (consumer, message id) ever processed, written in the handler's own transaction. */
export class CreateInboxMessages1732255000000 implements MigrationInterface {
  name = 'CreateInboxMessages1732255000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const schema = schemaOf(queryRunner);
    await queryRunner.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await queryRunner.query(`
      CREATE TABLE ${schema}."inbox_messages" (
        consumer     text        NOT NULL,
        message_id   text        NOT NULL,
        processed_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (consumer, message_id)
      )`);
    await queryRunner.query(`CREATE INDEX "inbox_messages_processed_at" ON ${schema}."inbox_messages" (processed_at)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE IF EXISTS ${schemaOf(queryRunner)}."inbox_messages"`);
  }
}
