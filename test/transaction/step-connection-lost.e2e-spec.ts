import { INestApplication } from '@nestjs/common';
import { currentStep, currentTransaction, Step, Workflow, WorkflowClient } from '../../lib';
import { sql } from '../support/test-app';
import { bootWorkflowApp, scenario } from '../workflow/support';

jest.setTimeout(60_000);

const s = scenario();
const ledger = `"${s.schema}".ledger`;
/** Step runs that had their transaction's connection cut by Postgres (the first run of each id). */
const cut = new Set<string>();

/** A transactional step whose first run loses its connection mid-step, as when Postgres restarts. */
@Workflow({ name: 'tx-connection-lost' })
class CutWorkflow {
  async run(input: { id: string }): Promise<string> {
    return this.debit(input.id);
  }

  @Step({ transaction: true }) // default attempts: 1
  async debit(id: string): Promise<string> {
    const tx = currentTransaction();
    await tx.query(`INSERT INTO ${ledger} (charge_id, step_key) VALUES ($1, $2)`, [id, currentStep().idempotencyKey]);
    if (!cut.has(id)) {
      cut.add(id);
      const [{ pid }] = await tx.query<{ pid: number }[]>('SELECT pg_backend_pid() AS pid');
      await sql('SELECT pg_terminate_backend($1)', [pid]); // what a Postgres restart does to every session
    }
    await tx.query('SELECT 1'); // fails on the first run: the connection is gone
    return `debited ${id}`;
  }
}

// Found by `npm run chaos`: a Postgres restart while a transactional step ran ended its workflow as failed
// (StepFailedError "Connection terminated"), because the lost connection of the library's own transaction was
// checkpointed as the step's final failure. The library now runs the step's job again instead.
describe('@Step({ transaction: true }) whose transaction loses its connection', () => {
  let app: INestApplication;
  let client: WorkflowClient;

  beforeAll(async () => {
    await sql(`CREATE SCHEMA IF NOT EXISTS "${s.schema}"; CREATE TABLE ${ledger} (id serial PRIMARY KEY, charge_id text NOT NULL, step_key text NOT NULL)`);
    ({ app, client } = await bootWorkflowApp(s, [CutWorkflow]));
  });

  afterAll(async () => {
    await app?.close();
  });

  it('runs the step again and completes, with its write once', async () => {
    const handle = await client.start(CutWorkflow, { id: 'c1' }, { workflowId: 'c1' });
    expect(await handle.result({ timeout: '30s' })).toBe('debited c1');
    expect(cut.has('c1')).toBe(true);
    expect(await sql(`SELECT charge_id FROM ${ledger}`)).toEqual([{ charge_id: 'c1' }]);
    const [step] = await client.steps(handle.executionId);
    expect(step).toMatchObject({ status: 'completed' });
  });
});
