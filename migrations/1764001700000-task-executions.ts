import { MigrationInterface, QueryRunner } from 'typeorm';

function schemaOf(queryRunner: QueryRunner): string {
  const options = queryRunner.connection.options as { schema?: string };
  return `"${(options.schema ?? 'public').replace(/"/g, '""')}"`;
}

/**
 * Tasks live in the executions table: `kind` tells a task ('task') from a workflow ('workflow', the default, so
 * existing rows are workflows). Task ids and workflow ids share the status-filtered unique index on workflow_id:
 * one id names one live or completed execution, whichever kind it is, so lookups by id (getHandle, cancel, send)
 * stay unambiguous. `parent_execution_id` already exists (child workflows) and records a task's parent too.
 */
export class TaskExecutions1764001700000 implements MigrationInterface {
  name = 'TaskExecutions1764001700000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const executions = `${schemaOf(queryRunner)}."workflow_executions"`;
    await queryRunner.query(
      `ALTER TABLE ${executions} ADD COLUMN IF NOT EXISTS kind text NOT NULL DEFAULT 'workflow' CHECK (kind IN ('workflow', 'task'))`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE ${schemaOf(queryRunner)}."workflow_executions" DROP COLUMN IF EXISTS kind`);
  }
}
