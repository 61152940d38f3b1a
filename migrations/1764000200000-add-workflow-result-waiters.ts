import { MigrationInterface, QueryRunner } from 'typeorm';

function schemaOf(queryRunner: QueryRunner): string {
  const options = queryRunner.connection.options as { schema?: string };
  return options.schema ?? 'public';
}

function q(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * Counts the `result()` calls waiting for an execution, so that retention "0" removes a finished execution only once
 * every waiter (in any process) has read its outcome. Adding a column with a constant default rewrites nothing.
 */
export class AddWorkflowResultWaiters1764000200000 implements MigrationInterface {
  name = 'AddWorkflowResultWaiters1764000200000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const executions = `${q(schemaOf(queryRunner))}."workflow_executions"`;
    await queryRunner.query(`ALTER TABLE ${executions} ADD COLUMN IF NOT EXISTS result_waiters integer NOT NULL DEFAULT 0`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const executions = `${q(schemaOf(queryRunner))}."workflow_executions"`;
    await queryRunner.query(`ALTER TABLE ${executions} DROP COLUMN IF EXISTS result_waiters`);
  }
}
