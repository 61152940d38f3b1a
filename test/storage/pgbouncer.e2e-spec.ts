import { Body, Controller, INestApplication, Injectable, Post } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { ChildProcess } from 'node:child_process';
import request from 'supertest';
import { currentTransaction, Idempotent, IdempotencyModule, IdempotentMethod, InboxService, RetentionService, WorkflowClient } from '../../lib';
import { WorkflowReconciler } from '../../lib/workflow/workflow.reconciler';
import { databaseUrl, redisUrl, sql, uniqueSchema } from '../support/test-app';
import { OrderWorkflow } from '../workflow/fixtures/order.workflow';
import { RUN_LOG_OPTIONS, RunLog } from '../workflow/fixtures/run-log';
import { FAST, uniquePrefix } from '../workflow/support';

interface Bouncer {
  url: string;
  proc: ChildProcess;
  pidFile: string;
}

interface ServicesModule {
  startPgBouncer(name: string, postgresUrl: string, options?: { poolSize?: number }): Promise<Bouncer>;
  stopPgBouncer(bouncer: Bouncer | undefined): Promise<void>;
}
// eslint-disable-next-line @typescript-eslint/no-require-imports
const services = require('../../scripts/services') as ServicesModule;

@Injectable()
class Counter {
  readonly runs = new Map<string, number>();
  inc(name: string): number {
    const n = (this.runs.get(name) ?? 0) + 1;
    this.runs.set(name, n);
    return n;
  }
}

@Controller()
class PaymentsController {
  constructor(private readonly counter: Counter) {}

  @Post('payments')
  async pay(@Body() body: { amount: number }) {
    const run = this.counter.inc(`pay:${body.amount}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
    return { run, amount: body.amount };
  }

  /** Transactional: claim, row and stored response in one transaction (one server connection under PgBouncer). */
  @Post('payments-tx')
  @Idempotent({ transaction: true })
  async payInTransaction(@Body() body: { amount: number }) {
    const run = this.counter.inc(`tx:${body.amount}`);
    await currentTransaction().query(`INSERT INTO ${txLedger.table} (amount) VALUES ($1)`, [body.amount]);
    await new Promise((resolve) => setTimeout(resolve, 50));
    return { run, amount: body.amount };
  }
}

const txLedger = { table: '' };

@Injectable()
class Billing {
  constructor(private readonly counter: Counter) {}

  @IdempotentMethod()
  async charge(customer: string): Promise<string> {
    const run = this.counter.inc(`charge:${customer}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
    return `charged ${customer} (run ${run})`;
  }
}

// The core cases through a real PgBouncer in transaction pooling with a small server pool (4 connections shared by
// every client), so consecutive statements of one client land on different server connections.
describe('through PgBouncer in transaction pooling (postgres.preparedStatements: false)', () => {
  const schema = uniqueSchema('pgb');
  let bouncer: Bouncer | undefined;
  let app: INestApplication;
  let counter: Counter;

  beforeAll(async () => {
    bouncer = await services.startPgBouncer(`pgb-${process.pid}-${schema}`, databaseUrl(), { poolSize: 4 });
    const moduleRef = await Test.createTestingModule({
      imports: [
        IdempotencyModule.forRoot({
          postgres: { url: bouncer.url, schema, preparedStatements: false, poolSize: 10 },
          redis: { url: redisUrl(), keyPrefix: `idem-${schema}` },
          migrationsRun: true,
          workflows: { ...FAST, queuePrefix: uniquePrefix() },
          retention: { cleanupInterval: false },
        }),
      ],
      controllers: [PaymentsController],
      providers: [Counter, Billing, OrderWorkflow, RunLog, { provide: RUN_LOG_OPTIONS, useValue: { url: databaseUrl(), schema } }],
    }).compile();
    app = moduleRef.createNestApplication();
    app.useLogger(false);
    await app.init();
    await app.get(RunLog).ensure();
    counter = app.get(Counter);
  });

  afterAll(async () => {
    await app?.close();
    await services.stopPgBouncer(bouncer);
    await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });

  const pay = (key: string, amount: number) =>
    request(app.getHttpServer()).post('/payments').set('Idempotency-Key', key).send({ amount });

  it('replays a completed key and refuses it for another payload', async () => {
    const first = await pay('pgb-1', 1);
    const retry = await pay('pgb-1', 1);
    expect(first.status).toBe(201);
    expect(retry.status).toBe(201);
    expect(retry.text).toBe(first.text);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect((await pay('pgb-1', 2)).status).toBe(422);
  });

  it('runs 40 distinct keys once each and 20 concurrent duplicates of one key once', async () => {
    const distinct = await Promise.all(Array.from({ length: 40 }, (_, i) => pay(`pgb-d-${i}`, 100 + i)));
    expect(distinct.map((r) => r.status)).toEqual(Array.from({ length: 40 }, () => 201));
    const storm = await Promise.all(Array.from({ length: 20 }, () => pay('pgb-storm', 7)));
    expect(counter.runs.get('pay:7')).toBe(1);
    for (const res of storm) expect([201, 409]).toContain(res.status);
  });

  it('runs a transactional route once for 20 concurrent duplicates, its row committed with the replayed response', async () => {
    txLedger.table = `"${schema}".tx_ledger`;
    await sql(`CREATE TABLE ${txLedger.table} (id serial PRIMARY KEY, amount int NOT NULL)`);
    const payTx = () => request(app.getHttpServer()).post('/payments-tx').set('Idempotency-Key', 'pgb-tx').send({ amount: 9 });
    const storm = await Promise.all(Array.from({ length: 20 }, payTx));
    for (const res of storm) expect([201, 409]).toContain(res.status);
    expect(counter.runs.get('tx:9')).toBe(1);
    const replay = await payTx();
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect((await sql(`SELECT id FROM ${txLedger.table}`)).length).toBe(1);
  });

  it('guards a provider method and processes an inbox message once', async () => {
    const billing = app.get(Billing);
    const results = await Promise.all(Array.from({ length: 10 }, () => billing.charge('c-1').catch((err: Error) => err.name)));
    expect(counter.runs.get('charge:c-1')).toBe(1);
    expect(results).toContain('charged c-1 (run 1)');
    expect(await billing.charge('c-1')).toBe('charged c-1 (run 1)');
    const inbox = app.get(InboxService);
    expect((await inbox.process('evt-1', 'pgb', () => Promise.resolve())).status).toBe('processed');
    expect((await inbox.process('evt-1', 'pgb', () => Promise.resolve())).status).toBe('duplicate');
  });

  it('runs a workflow to completion, and a second start returns its stored result', async () => {
    const client = app.get(WorkflowClient);
    const handle = await client.start(OrderWorkflow, { orderId: 'pgb-order' }, { workflowId: 'pgb-order' });
    const result = await handle.result();
    expect(result.results).toHaveLength(3);
    const again = await client.start(OrderWorkflow, { orderId: 'pgb-order' }, { workflowId: 'pgb-order' });
    expect(await again.result()).toEqual(result);
    const ran = await sql<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".step_runs WHERE phase = 'done'`);
    expect(Number(ran[0].n)).toBe(3);
  });

  it('retention and the reconciler take and return their lease, and leave no advisory lock on any server connection', async () => {
    const [report] = await Promise.all([app.get(RetentionService).cleanup(), ...[0, 1, 2, 3, 4].map((i) => pay(`pgb-r-${i}`, 200 + i))]);
    expect(report).not.toBeNull();
    // The app's own passes (every 500 ms here) would hold the lease at any moment: only this test's passes run now.
    await app.get(WorkflowReconciler).stop();
    expect(await app.get(WorkflowReconciler).reconcile()).toBe(0);
    expect(await app.get(RetentionService).cleanup()).not.toBeNull();
    expect(await sql(`SELECT name FROM "${schema}".idempotency_locks`)).toEqual([]);
    const keys = [`nestjs-idempotency:retention:${schema}`, `nestjs-idempotency:workflow-reconciler:${schema}`];
    expect(await sql(`SELECT objid FROM pg_locks WHERE locktype = 'advisory'
                         AND objid::bigint IN (SELECT hashtext(k)::bigint & 4294967295 FROM unnest($1::text[]) AS k)`, [keys])).toEqual([]);
  });
});
