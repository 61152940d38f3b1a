import { MigrationInterface, QueryRunner } from 'typeorm';

function schemaOf(queryRunner: QueryRunner): string {
  const options = queryRunner.connection.options as { schema?: string };
  return `"${(options.schema ?? 'public').replace(/"/g, '""')}"`;
}

/**
 * Schedules (`@Scheduled()`, `WorkflowClient.schedule()`): one row per schedule with its cron, time zone and catch-up
 * policy, what it starts (`kind` and `target`, e.g. a workflow name), and `last_occurrence`, the newest occurrence
 * already handled. BullMQ's job schedulers never replay runs missed while no instance was up; this durable mark is
 * how missed occurrences are found. `source` tells a decorator's schedule (declared again at every boot) from one
 * added at runtime (restored from this row at boot). The `caught_up_*` columns describe the last catch-up at boot.
 */
export class CreateSchedules1764001800000 implements MigrationInterface {
  name = 'CreateSchedules1764001800000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS ${schemaOf(queryRunner)}."idempotency_schedules" (
        name text PRIMARY KEY,
        kind text NOT NULL,
        target text NOT NULL,
        cron text NOT NULL,
        timezone text,
        catch_up text NOT NULL,
        source text NOT NULL,
        last_occurrence timestamptz NOT NULL,
        caught_up_through timestamptz,
        caught_up_missed integer,
        caught_up_started integer,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE IF EXISTS ${schemaOf(queryRunner)}."idempotency_schedules"`);
  }
}
