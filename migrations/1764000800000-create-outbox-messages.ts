import { MigrationInterface, QueryRunner } from 'typeorm';

function schemaOf(queryRunner: QueryRunner): string {
  const options = queryRunner.connection.options as { schema?: string };
  return `"${(options.schema ?? 'public').replace(/"/g, '""')}"`;
}

/**
 * Creates the transactional outbox: one row per published message, written in the publisher's transaction and
 * relayed in `seq` order per key. The partial indexes serve the relay (pending in publish order, the undelivered
 * head of each key) and retention (delivered messages by delivery time).
 */
export class CreateOutboxMessages1764000800000 implements MigrationInterface {
  name = 'CreateOutboxMessages1764000800000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const schema = schemaOf(queryRunner);
    await queryRunner.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await queryRunner.query(`
      CREATE TABLE ${schema}."outbox_messages" (
        seq          bigserial   PRIMARY KEY,
        id           text        NOT NULL UNIQUE,
        topic        text        NOT NULL,
        key          text,
        payload      jsonb,
        headers      jsonb       NOT NULL DEFAULT '{}',
        status       text        NOT NULL DEFAULT 'pending',
        attempts     integer     NOT NULL DEFAULT 0,
        last_error   text,
        created_at   timestamptz NOT NULL DEFAULT now(),
        available_at timestamptz NOT NULL DEFAULT now(),
        delivered_at timestamptz
      )`);
    await queryRunner.query(`CREATE INDEX "outbox_messages_pending" ON ${schema}."outbox_messages" (seq) WHERE status = 'pending'`);
    await queryRunner.query(
      `CREATE INDEX "outbox_messages_open_key" ON ${schema}."outbox_messages" (key, seq) WHERE status IN ('pending', 'dead') AND key IS NOT NULL`,
    );
    await queryRunner.query(`CREATE INDEX "outbox_messages_due" ON ${schema}."outbox_messages" (available_at) WHERE status = 'pending'`);
    await queryRunner.query(`CREATE INDEX "outbox_messages_delivered" ON ${schema}."outbox_messages" (delivered_at) WHERE status = 'delivered'`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE IF EXISTS ${schemaOf(queryRunner)}."outbox_messages"`);
  }
}
