import { INestApplication } from '@nestjs/common';
import { join } from 'node:path';
import { TaskClient } from '../../lib';
import { sql } from '../support/test-app';
import { Child, kill, spawnWorker } from '../workflow/processes';
import { bootWorkflowApp, scenario } from '../workflow/support';
import { ReceiptTasks, taskRuns } from './fixtures/receipt.tasks';

const ENQUEUER = join(__dirname, 'fixtures', 'enqueue-process.ts');

describe('20 concurrent enqueues of one task id from two processes', () => {
  const s = scenario();
  let app: INestApplication;
  const children: Child[] = [];

  beforeAll(async () => {
    // This process runs the task queue's worker (and has migrated the schema before the enqueuers start).
    ({ app } = await bootWorkflowApp(s, [ReceiptTasks]));
  }, 60_000);
  afterAll(async () => {
    await Promise.all(children.map((c) => kill(c)));
    await app.close();
  });

  it('make one execution, and every caller gets its id', async () => {
    const env = { TASK_ID: 'race-receipt', ENQUEUES: '10', START_AT: String(Date.now() + 8_000) };
    children.push(spawnWorker(s, env, ENQUEUER), spawnWorker(s, env, ENQUEUER));
    const results = await Promise.all(children.map(async (c) => JSON.parse((await c.line('RESULT ', 90_000)).slice('RESULT '.length)) as string[]));
    const ids = results.flat();
    expect(ids).toHaveLength(20);
    expect(new Set(ids).size).toBe(1);
    expect(await sql(`SELECT id FROM "${s.schema}".workflow_executions WHERE workflow_id = 'race-receipt'`)).toEqual([{ id: ids[0] }]);
    const handle = await app.get(TaskClient).getTask('race-receipt');
    expect(await handle.result({ timeout: 30_000 })).toEqual({ receiptId: 'rcpt-race', amount: 5 });
    expect(taskRuns.get('receipt:race')).toBe(1);
  }, 120_000);
});
