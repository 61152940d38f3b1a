import { MigrationInterface, QueryRunner } from 'typeorm';

function schemaOf(queryRunner: QueryRunner): string {
  const options = queryRunner.connection.options as { schema?: string };
  return `"${(options.schema ?? 'public').replace(/"/g, '""')}"`;
}

/**
 * Workflows that wait and talk (`sleep`, `recv`, `setEvent`, child workflows):
 * - an execution may be suspended (`suspended_until`: its run ended, its job is delayed until then; 'infinity' when
 *   only a message or a child can wake it), `wake_requested` is set by a message or a finished child so that a run
 *   about to suspend runs again instead, and `parent_execution_id` links a child to the execution that started it;
 * - `workflow_waits`: the wake-up time of each pending `sleep`/`recv` at its journal position (the outcome itself is
 *   a checkpoint in `workflow_steps` once it fires);
 * - `workflow_messages`: messages sent to an execution, in send order, each consumed once at a journal position;
 * - `workflow_events`: the latest value per (execution, key).
 * The new tables cascade with their execution, so retention removes them with it. Adding nullable columns, or one
 * with a constant default, rewrites nothing.
 */
export class WorkflowWaits1764001400000 implements MigrationInterface {
  name = 'WorkflowWaits1764001400000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const schema = schemaOf(queryRunner);
    const executions = `${schema}."workflow_executions"`;
    await queryRunner.query(`
      ALTER TABLE ${executions}
        ADD COLUMN IF NOT EXISTS parent_execution_id uuid,
        ADD COLUMN IF NOT EXISTS suspended_until timestamptz,
        ADD COLUMN IF NOT EXISTS wake_requested boolean NOT NULL DEFAULT false`);
    await queryRunner.query(`
      CREATE INDEX IF NOT EXISTS "workflow_executions_parent" ON ${executions} (parent_execution_id)
      WHERE parent_execution_id IS NOT NULL`);
    await queryRunner.query(`
      CREATE INDEX IF NOT EXISTS "workflow_executions_suspended" ON ${executions} (suspended_until)
      WHERE status = 'pending' AND suspended_until IS NOT NULL`);
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS ${schema}."workflow_waits" (
        execution_id  uuid        NOT NULL REFERENCES ${executions} (id) ON DELETE CASCADE,
        position      integer     NOT NULL,
        kind          text        NOT NULL,
        wake_at       timestamptz NOT NULL,
        created_at    timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (execution_id, position)
      )`);
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS ${schema}."workflow_messages" (
        seq                bigserial   PRIMARY KEY,
        execution_id       uuid        NOT NULL REFERENCES ${executions} (id) ON DELETE CASCADE,
        topic              text        NOT NULL,
        message            jsonb,
        idempotency_key    text,
        consumed_position  integer,
        created_at         timestamptz NOT NULL DEFAULT now()
      )`);
    await queryRunner.query(`
      CREATE UNIQUE INDEX IF NOT EXISTS "workflow_messages_key" ON ${schema}."workflow_messages" (execution_id, idempotency_key)
      WHERE idempotency_key IS NOT NULL`);
    await queryRunner.query(`
      CREATE INDEX IF NOT EXISTS "workflow_messages_unread" ON ${schema}."workflow_messages" (execution_id, topic, seq)
      WHERE consumed_position IS NULL`);
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS ${schema}."workflow_events" (
        execution_id  uuid        NOT NULL REFERENCES ${executions} (id) ON DELETE CASCADE,
        key           text        NOT NULL,
        value         jsonb,
        updated_at    timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (execution_id, key)
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const schema = schemaOf(queryRunner);
    await queryRunner.query(`DROP TABLE IF EXISTS ${schema}."workflow_events"`);
    await queryRunner.query(`DROP TABLE IF EXISTS ${schema}."workflow_messages"`);
    await queryRunner.query(`DROP TABLE IF EXISTS ${schema}."workflow_waits"`);
    await queryRunner.query(`DROP INDEX IF EXISTS ${schema}."workflow_executions_suspended"`);
    await queryRunner.query(`DROP INDEX IF EXISTS ${schema}."workflow_executions_parent"`);
    await queryRunner.query(`
      ALTER TABLE ${schema}."workflow_executions"
        DROP COLUMN IF EXISTS parent_execution_id, DROP COLUMN IF EXISTS suspended_until, DROP COLUMN IF EXISTS wake_requested`);
  }
}
