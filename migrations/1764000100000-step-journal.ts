import { MigrationInterface, QueryRunner } from 'typeorm';

function schemaOf(queryRunner: QueryRunner): string {
  const options = queryRunner.connection.options as { schema?: string };
  return options.schema ?? 'public';
}

function q(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * The step journal: every checkpoint gets a per-execution completion sequence number (assigned at commit under
 * the execution's row lock, so later numbers never commit before earlier ones) and the hash of the step's canonical
 * arguments; replay delivers outcomes in that order and checks the hash. An execution keeps its counter, the last
 * sequence number its final run received, and the positions whose failures ended it (what `resume()` re-runs).
 * A failed checkpoint that `resume()` re-runs stays in place as `retrying`, keeping its sequence number.
 * Existing checkpoints are numbered in position order, the order in which earlier versions replayed them.
 */
export class StepJournal1764000100000 implements MigrationInterface {
  name = 'StepJournal1764000100000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const schema = q(schemaOf(queryRunner));
    const executions = `${schema}."workflow_executions"`;
    const steps = `${schema}."workflow_steps"`;
    await queryRunner.query(`
      ALTER TABLE ${executions}
        ADD COLUMN next_step_seq integer NOT NULL DEFAULT 0,
        ADD COLUMN delivered_through integer,
        ADD COLUMN ended_by integer[]`);
    await queryRunner.query(`ALTER TABLE ${steps} ADD COLUMN seq integer, ADD COLUMN args_hash text`);
    await queryRunner.query(`
      UPDATE ${steps} s SET seq = n.seq
        FROM (SELECT execution_id, position, (row_number() OVER (PARTITION BY execution_id ORDER BY position) - 1)::int AS seq
                FROM ${steps}) n
       WHERE s.execution_id = n.execution_id AND s.position = n.position`);
    await queryRunner.query(`
      UPDATE ${executions} x SET next_step_seq = c.n
        FROM (SELECT execution_id, count(*)::int AS n FROM ${steps} GROUP BY execution_id) c
       WHERE x.id = c.execution_id`);
    await queryRunner.query(`ALTER TABLE ${steps} ALTER COLUMN seq SET NOT NULL`);
    await queryRunner.query(`CREATE UNIQUE INDEX "workflow_steps_seq" ON ${steps} (execution_id, seq)`);
    await queryRunner.query(`ALTER TABLE ${steps} DROP CONSTRAINT IF EXISTS "workflow_steps_status_check"`);
    await queryRunner.query(`
      ALTER TABLE ${steps} ADD CONSTRAINT "workflow_steps_status_check" CHECK (status IN ('completed', 'failed', 'retrying'))`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const schema = q(schemaOf(queryRunner));
    const executions = `${schema}."workflow_executions"`;
    const steps = `${schema}."workflow_steps"`;
    await queryRunner.query(`UPDATE ${steps} SET status = 'failed' WHERE status = 'retrying'`);
    await queryRunner.query(`ALTER TABLE ${steps} DROP CONSTRAINT IF EXISTS "workflow_steps_status_check"`);
    await queryRunner.query(`ALTER TABLE ${steps} ADD CONSTRAINT "workflow_steps_status_check" CHECK (status IN ('completed', 'failed'))`);
    await queryRunner.query(`DROP INDEX IF EXISTS ${schema}."workflow_steps_seq"`);
    await queryRunner.query(`ALTER TABLE ${steps} DROP COLUMN seq, DROP COLUMN args_hash`);
    await queryRunner.query(`ALTER TABLE ${executions} DROP COLUMN next_step_seq, DROP COLUMN delivered_through, DROP COLUMN ended_by`);
  }
}
