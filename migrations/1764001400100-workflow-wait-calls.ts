import { MigrationInterface, QueryRunner } from 'typeorm';

function schemaOf(queryRunner: QueryRunner): string {
  const options = queryRunner.connection.options as { schema?: string };
  return `"${(options.schema ?? 'public').replace(/"/g, '""')}"`;
}

/**
 * Records with each durable wait the hash of the call's arguments (the topic of `recv`), so that a replay calling
 * another wait (or a `recv` of another topic) at a position where one is registered but has not fired is detected as
 * a DeterminismError, as a mismatching checkpoint is. Waits registered before it have none (not compared).
 */
export class WorkflowWaitCalls1764001400100 implements MigrationInterface {
  name = 'WorkflowWaitCalls1764001400100';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE ${schemaOf(queryRunner)}."workflow_waits" ADD COLUMN IF NOT EXISTS args_hash text`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE ${schemaOf(queryRunner)}."workflow_waits" DROP COLUMN IF EXISTS args_hash`);
  }
}
