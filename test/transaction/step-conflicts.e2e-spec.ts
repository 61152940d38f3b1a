// A transactional step whose transaction Postgres aborts for a conflict with a concurrent one (serialization failure
// at 'serializable', here at its checkpoint and COMMIT) runs again in place: its job neither fails nor goes missing.
import { INestApplication } from '@nestjs/common';
import { currentTransaction, Step, Workflow, WorkflowClient } from '../../lib';
import { TransactionalSteps } from '../../lib/transaction/transactional-steps';
import { StepWorker } from '../../lib/workflow/step-worker';
import { gate, waitUntil } from '../support/resilience';
import { sql } from '../support/test-app';
import { bootWorkflowApp, scenario } from '../workflow/support';

/** Both steps have read and written before either commits: a write skew, which 'serializable' refuses to commit twice. */
const skew = { table: '', wrote: 0, bothWrote: gate() };

@Workflow({ name: 'skew' })
class SkewWorkflow {
  async run(input: { reads: string; writes: string }): Promise<number> {
    return this.move(input.reads, input.writes);
  }

  @Step({ transaction: true, isolation: 'serializable' })
  async move(reads: string, writes: string): Promise<number> {
    const [{ n }] = await currentTransaction().query<Array<{ n: number }>>(`SELECT count(*)::int AS n FROM ${skew.table} WHERE k = $1`, [reads]);
    await currentTransaction().query(`INSERT INTO ${skew.table} (k) VALUES ($1)`, [writes]);
    skew.wrote++;
    await skew.bothWrote.promise;
    return n;
  }
}

describe('@Step({ transaction: true }) aborted for a serialization conflict', () => {
  const s = scenario();
  let app: INestApplication;
  let client: WorkflowClient;

  beforeAll(async () => {
    skew.table = `"${s.schema}".skew`;
    await sql(`CREATE SCHEMA IF NOT EXISTS "${s.schema}"; CREATE TABLE ${skew.table} (id serial PRIMARY KEY, k text NOT NULL)`);
    ({ app, client } = await bootWorkflowApp(s, [SkewWorkflow]));
  });

  afterAll(async () => {
    await app?.close();
  });

  it('runs the losing step again in place: each job is processed once, each write committed once', async () => {
    const worker = app.get(StepWorker);
    const processed = jest.spyOn(worker, 'process');
    const runs = jest.spyOn(app.get<TransactionalSteps, { runOnce: () => Promise<unknown> }>(TransactionalSteps), 'runOnce');
    const one = await client.start(SkewWorkflow, { reads: 'a', writes: 'b' }, { workflowId: 'skew-1' });
    const two = await client.start(SkewWorkflow, { reads: 'b', writes: 'a' }, { workflowId: 'skew-2' });
    await waitUntil('both steps read and wrote', () => skew.wrote === 2);
    skew.bothWrote.open();
    const results = await Promise.all([one.result({ timeout: '30s' }), two.result({ timeout: '30s' })]);
    // The loser ran again after the winner committed, and so saw the winner's row.
    expect([...results].sort()).toEqual([0, 1]);
    expect(runs).toHaveBeenCalledTimes(3);
    expect(processed).toHaveBeenCalledTimes(2);
    const rows = await sql<{ k: string; n: number }>(`SELECT k, count(*)::int AS n FROM ${skew.table} GROUP BY k ORDER BY k`);
    expect(rows).toEqual([{ k: 'a', n: 1 }, { k: 'b', n: 1 }]);
  });
});
