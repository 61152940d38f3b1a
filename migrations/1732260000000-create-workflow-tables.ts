import { MigrationInterface, QueryRunner } from 'typeorm';

function schemaOf(queryRunner: QueryRunner): string {
  const options = queryRunner.connection.options as { schema?: string };
  return options.schema ?? 'public';
}

function q(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * Creates the durable-workflow tables: executions, with the status-filtered partial unique index on
 * the workflow id (failed, cancelled and timed_out executions do not block a new one), and step
 * checkpoints keyed by (execution id, position).
 */
export class CreateWorkflowTables1732260000000 implements MigrationInterface {
  name = 'CreateWorkflowTables1732260000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const schema = q(schemaOf(queryRunner));
    const executions = `${schema}."workflow_executions"`;
    const steps = `${schema}."workflow_steps"`;
    await queryRunner.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await queryRunner.query(`
      CREATE TABLE ${executions} (
        id                 uuid        PRIMARY KEY,
        workflow_id        text        NOT NULL,
        workflow_name      text        NOT NULL,
        status             text        NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled', 'timed_out')),
        input              jsonb,
        input_hash         text        NOT NULL,
        result             jsonb,
        error              jsonb,
        recovery_attempts  integer     NOT NULL DEFAULT 0,
        deadline_at        timestamptz,
        created_at         timestamptz NOT NULL DEFAULT now(),
        updated_at         timestamptz NOT NULL DEFAULT now(),
        started_at         timestamptz,
        completed_at       timestamptz
      )`);
    await queryRunner.query(`
      CREATE UNIQUE INDEX "workflow_executions_active_id" ON ${executions} (workflow_id)
      WHERE status NOT IN ('failed', 'cancelled', 'timed_out')`);
    await queryRunner.query(`CREATE INDEX "workflow_executions_workflow_id" ON ${executions} (workflow_id, created_at)`);
    await queryRunner.query(`
      CREATE INDEX "workflow_executions_unfinished" ON ${executions} (updated_at)
      WHERE status IN ('pending', 'running')`);
    await queryRunner.query(`
      CREATE INDEX "workflow_executions_retention" ON ${executions} (workflow_name, completed_at)
      WHERE completed_at IS NOT NULL`);
    await queryRunner.query(`
      CREATE TABLE ${steps} (
        execution_id  uuid        NOT NULL REFERENCES ${executions} (id) ON DELETE CASCADE,
        position      integer     NOT NULL,
        name          text        NOT NULL,
        status        text        NOT NULL CHECK (status IN ('completed', 'failed')),
        result        jsonb,
        error         jsonb,
        attempts      integer     NOT NULL DEFAULT 1,
        completed_at  timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (execution_id, position)
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const schema = q(schemaOf(queryRunner));
    await queryRunner.query(`DROP TABLE IF EXISTS ${schema}."workflow_steps"`);
    await queryRunner.query(`DROP TABLE IF EXISTS ${schema}."workflow_executions"`);
  }
}
