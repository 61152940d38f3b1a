import { INestApplication, Injectable } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { IdempotencyTestingModule, Step, Workflow, WorkflowClient, WorkflowDefinitionError } from '../../lib';
import type { StepJobData } from '../../lib/workflow/step-job';
import { IdempotencyTransactions } from '../../lib/transaction/idempotency-transactions';
import { StepWorker } from '../../lib/workflow/step-worker';
import { gate, waitUntil } from '../support/resilience';
import { sql } from '../support/test-app';
import { bootWorkflowApp, scenario } from '../workflow/support';
import { LedgerWorkflow } from './fixtures/ledger.workflow';
import { nodeEntry } from '../support/node-entry';

const ROOT = join(__dirname, '..', '..');

async function rows(schema: string, id: string): Promise<number> {
  return Number((await sql<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".ledger WHERE charge_id = $1`, [id]))[0].n);
}

describe('@Step({ transaction: true })', () => {
  const s = scenario();
  let app: INestApplication;
  let client: WorkflowClient;
  let wrote: string[] = [];


  beforeAll(async () => {
    await sql(`CREATE SCHEMA IF NOT EXISTS "${s.schema}"; CREATE TABLE "${s.schema}".ledger (id serial PRIMARY KEY, charge_id text NOT NULL, step_key text NOT NULL)`);
    LedgerWorkflow.table = `"${s.schema}".ledger`;
    LedgerWorkflow.onWrote = (id) => wrote.push(id);
    ({ app, client } = await bootWorkflowApp(s, [LedgerWorkflow]));
  });

  afterAll(async () => {
    await app?.close();
  });

  beforeEach(() => {
    wrote = [];
    LedgerWorkflow.hold = () => Promise.resolve();
    jest.restoreAllMocks();
  });

  it('commits the step write with its checkpoint: invisible until then, once in the end', async () => {
    const held = gate();
    LedgerWorkflow.hold = () => held.promise;
    const handle = await client.start(LedgerWorkflow, { id: 's1' }, { workflowId: 's1' });
    await waitUntil('the step wrote', () => wrote.includes('s1'));
    expect(await rows(s.schema, 's1')).toBe(0);
    expect(await client.steps(handle.executionId)).toEqual([]);
    held.open();
    expect(await handle.result({ timeout: '30s' })).toBe('debited s1');
    expect(await rows(s.schema, 's1')).toBe(1);
  });

  it("a fresh job's first start reads nothing first: its START goes with the step's write, which commits with the checkpoint", async () => {
    const transactions = app.get(IdempotencyTransactions);
    const read = jest.spyOn(transactions, 'beginWith');
    const deferred = jest.spyOn(transactions, 'beginOnFirstStatement');
    const handle = await client.start(LedgerWorkflow, { id: 's0' }, { workflowId: 's0' });
    expect(await handle.result({ timeout: '30s' })).toBe('debited s0');
    expect(read).not.toHaveBeenCalled();
    expect(deferred).toHaveBeenCalledTimes(1);
    // one transaction wrote both rows
    const [written] = await sql<{ ledger: string; checkpoint: string }>(
      `SELECT l.xmin::text AS ledger, c.xmin::text AS checkpoint FROM "${s.schema}".ledger l, "${s.schema}".workflow_steps c
        WHERE l.charge_id = 's0' AND c.execution_id = $1`, [handle.executionId]);
    expect(written.ledger).toBe(written.checkpoint);
  });

  it('two workers finishing the same step leave its write once: the loser rolls back and adopts the checkpoint', async () => {
    const worker = app.get(StepWorker);
    const process = worker.process.bind(worker);
    let first: { queue: string; data: StepJobData } | undefined;
    jest.spyOn(worker, 'process').mockImplementation((queue, job) => {
      first ??= { queue, data: job.data };
      return process(queue, job);
    });
    const held = gate();
    LedgerWorkflow.hold = () => held.promise;
    const handle = await client.start(LedgerWorkflow, { id: 's2' }, { workflowId: 's2' });
    await waitUntil('the first worker wrote', () => wrote.includes('s2') && first);
    // A second worker runs the same step job (as after a stalled-job takeover) while the first is still in it.
    const second = process(first!.queue, { id: 'second-worker', data: first!.data, attemptsMade: 0 });
    await waitUntil('the second worker wrote too', () => wrote.filter((id) => id === 's2').length === 2);
    held.open();
    // A step job returns only a marker (results never go into Redis); the checkpoint it adopted is the first worker's.
    expect(await second).toEqual({ kind: 'checkpointed', position: first!.data.position });
    expect(await handle.result({ timeout: '30s' })).toBe('debited s2');
    expect(await rows(s.schema, 's2')).toBe(1);
    // A late redelivery of the job reads the checkpoint in its transaction and does not run the step again.
    const writes = wrote.length;
    expect(await process(first!.queue, { id: 'late-redelivery', data: first!.data, attemptsMade: 0 })).toEqual({ kind: 'checkpointed', position: first!.data.position });
    expect(wrote.length).toBe(writes);
    expect(await rows(s.schema, 's2')).toBe(1);
  });

  it('runs nothing for a step job of a cancelled execution: its state is read in the step transaction', async () => {
    const held = gate();
    LedgerWorkflow.hold = () => held.promise;
    const worker = app.get(StepWorker);
    const process = worker.process.bind(worker);
    let first: { queue: string; data: StepJobData } | undefined;
    jest.spyOn(worker, 'process').mockImplementation((queue, job) => {
      first ??= { queue, data: job.data };
      return process(queue, job);
    });
    await client.start(LedgerWorkflow, { id: 's3' }, { workflowId: 's3' });
    await waitUntil('the step wrote', () => wrote.includes('s3') && first);
    await client.cancel('s3');
    const writes = wrote.length;
    expect(await process(first!.queue, { id: 'after-cancel', data: first!.data, attemptsMade: 0 })).toEqual({ kind: 'stopped', status: 'cancelled' });
    expect(wrote.length).toBe(writes);
    held.open();
  });
});

describe('@Step({ transaction: true }) in a worker killed with SIGKILL mid-step', () => {
  const s = scenario();
  const apps: INestApplication[] = [];

  afterAll(async () => {
    for (const app of apps) await app.close();
  });

  it('leaves nothing of its write; the step then runs once on another instance', async () => {
    await sql(`CREATE SCHEMA IF NOT EXISTS "${s.schema}"; CREATE TABLE "${s.schema}".ledger (id serial PRIMARY KEY, charge_id text NOT NULL, step_key text NOT NULL)`);
    LedgerWorkflow.table = `"${s.schema}".ledger`;
    LedgerWorkflow.hold = () => Promise.resolve();
    // This process only starts the workflow (workers off): the child is the one that runs the step.
    const starter = await bootWorkflowApp(s, [LedgerWorkflow], { workers: false });
    apps.push(starter.app);
    const child: ChildProcess = spawn(process.execPath, nodeEntry(join(__dirname, 'fixtures', 'step-worker-process.ts')), {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: s.databaseUrl, REDIS_URL: s.redisUrl, WF_SCHEMA: s.schema, WF_PREFIX: s.prefix, TS_NODE_PROJECT: join(ROOT, 'tsconfig.json') },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const lines: string[] = [];
    createInterface({ input: child.stdout! }).on('line', (line) => lines.push(line));
    const exited = new Promise((resolve) => child.once('exit', resolve));
    let handle;
    try {
      await waitUntil(`the child is ready (output: ${lines.join(' | ')})`, () => lines.includes('READY'), { timeoutMs: 60_000 });
      handle = await starter.client.start(LedgerWorkflow, { id: 's3' }, { workflowId: 's3' });
      await waitUntil(`the child wrote (output: ${lines.join(' | ')})`, () => lines.includes('WROTE s3'), { timeoutMs: 30_000 });
    } finally {
      child.kill('SIGKILL');
      await exited;
    }
    expect(await rows(s.schema, 's3')).toBe(0);
    // Another instance (workers on) takes the stalled step over and runs it once.
    const worker = await bootWorkflowApp(s, [LedgerWorkflow]);
    apps.push(worker.app);
    expect(await handle.result({ timeout: '60s' })).toBe('debited s3');
    expect(await rows(s.schema, 's3')).toBe(1);
  }, 120_000);
});

describe('@Step({ transaction: true }) without a Postgres store', () => {
  it('fails at startup under IdempotencyTestingModule', async () => {
    @Injectable()
    @Workflow({ name: 'tx-none' })
    class NoDatabaseWorkflow {
      async run(): Promise<void> {
        await this.write();
      }

      @Step({ transaction: true })
      async write(): Promise<void> {}
    }
    const moduleRef = await Test.createTestingModule({ imports: [IdempotencyTestingModule.forRoot()], providers: [NoDatabaseWorkflow] }).compile();
    await expect(moduleRef.init()).rejects.toThrow(WorkflowDefinitionError);
    await expect(moduleRef.init()).rejects.toThrow(/transaction: true needs the Postgres store/);
  });
});
