import { INestApplication } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { IDEMPOTENCY_MIGRATIONS, IDEMPOTENCY_MIGRATIONS_TABLE, Step, Workflow } from '../../lib';
import { sql } from '../support/test-app';
import { bootWorkflowApp, scenario } from './support';

jest.setTimeout(60_000); // real processes and servers; waits are bounded by the assertions' own timeouts

const ran: string[] = [];

@Workflow({ name: 'upgraded' })
class UpgradedWorkflow {
  async run(input: { n: number }): Promise<number[]> {
    const a = await this.one(input.n);
    const [b, c] = await Promise.all([this.two(a), this.three(a)]);
    return [a, b, c, await this.four(b + c)];
  }

  @Step()
  one(n: number): Promise<number> {
    ran.push('one');
    return Promise.resolve(n);
  }

  @Step()
  two(n: number): Promise<number> {
    ran.push('two');
    return Promise.resolve(n * 2);
  }

  @Step()
  three(n: number): Promise<number> {
    ran.push('three');
    return Promise.resolve(n * 3);
  }

  @Step()
  four(n: number): Promise<number> {
    ran.push('four');
    return Promise.resolve(n + 1);
  }
}

// The step journal migration upgrades a database of the previous schema in place: checkpoints written before it
// are numbered in position order and replay as before.
describe('step journal migration on an existing database', () => {
  const s = scenario();
  let app: INestApplication | undefined;

  afterAll(async () => {
    await app?.close();
  });

  it('an execution checkpointed under the previous schema resumes after the upgrade without running its steps again', async () => {
    const previous = new DataSource({
      type: 'postgres',
      url: s.databaseUrl,
      schema: s.schema,
      // The schema as it was before the journal: the migrations in front of it.
      migrations: IDEMPOTENCY_MIGRATIONS.slice(0, IDEMPOTENCY_MIGRATIONS.findIndex((m) => m.name === 'StepJournal1764000100000')),
      migrationsTableName: IDEMPOTENCY_MIGRATIONS_TABLE,
    });
    await previous.initialize();
    try {
      await previous.query(`CREATE SCHEMA IF NOT EXISTS "${s.schema}"`);
      await previous.runMigrations({ transaction: 'each' });
    } finally {
      await previous.destroy();
    }
    const executionId = randomUUID();
    await sql(`INSERT INTO "${s.schema}".workflow_executions (id, workflow_id, workflow_name, status, input, input_hash, updated_at)
               VALUES ($1, 'old-1', 'upgraded', 'pending', '{"n":5}', 'h', now() - interval '1 minute')`, [executionId]);
    await sql(`INSERT INTO "${s.schema}".workflow_steps (execution_id, position, name, status, result) VALUES
               ($1, 0, 'one', 'completed', '5'), ($1, 1, 'two', 'completed', '10'), ($1, 2, 'three', 'completed', '15')`, [executionId]);

    let client;
    ({ app, client } = await bootWorkflowApp(s, [UpgradedWorkflow])); // migrationsRun: true applies the journal migration
    const handle = await client.getHandle<number[]>('old-1'); // the reconciler enqueues the pending execution
    expect(await handle.result({ timeout: '30s' })).toEqual([5, 10, 15, 26]);
    expect(ran).toEqual(['four']);
    const steps = await client.steps(executionId);
    expect(steps.map((c) => [c.position, c.sequence, c.argsHash === null])).toEqual([[0, 0, true], [1, 1, true], [2, 2, true], [3, 3, false]]);
  });
});
