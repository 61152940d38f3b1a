// Issue 8, @nestjs-cls/transactional: a repository written for the plugin's TransactionHost (txHost.tx, TypeORM
// adapter) joins the library's transaction on every face, so its writes commit iff the outcome is stored; where no
// transaction of the library is open the plugin behaves as before; a plugin on another DataSource of the same database
// fails at startup, one on another database (records kept apart on purpose) is left alone.
import { ClsPluginTransactional, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { Body, Controller, Headers, INestApplication, Injectable, Post } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { ClsModule } from 'nestjs-cls';
import { join } from 'node:path';
import request from 'supertest';
import {
  currentTransaction, IdempotencyConfigError, Idempotent, IdempotencyModule, IdempotencyService, IdempotentMethod, InboxService, NotInTransactionError, Step, Workflow, WorkflowClient,
} from '../../lib';
import { listen, waitUntil } from '../support/resilience';
import { ADAPTERS, AdapterName, databaseUrl, redisUrl, sql, uniqueSchema } from '../support/test-app';
import { spawnWorker } from '../workflow/processes';
import { FAST, uniquePrefix } from '../workflow/support';
import { CLS_PAYMENTS_DDL, ClsLedgerRepository, ClsPaymentRepository, clsAppImports, Seen } from './fixtures/cls-payments';

jest.setTimeout(120_000);

@Controller('cls')
class ChargeController {
  constructor(private readonly payments: ClsPaymentRepository) {}

  @Post('charges')
  @Idempotent({ transaction: true })
  async charge(@Headers('idempotency-key') key: string, @Body() body: { fail?: string }): Promise<Seen> {
    const seen = await this.payments.save(key, 'http');
    if (body.fail) throw new Error(body.fail);
    return seen;
  }
}

@Injectable()
class ClsBilling {
  constructor(private readonly payments: ClsPaymentRepository) {}

  /** The repository's own @Transactional() method joins the library's transaction instead of committing on its own. */
  @IdempotentMethod({ key: (id: string) => id, transaction: true })
  async charge(id: string, fail?: string): Promise<Seen> {
    const seen = await this.payments.saveTransactional(id, 'method');
    if (fail) throw new Error(fail);
    return seen;
  }
}

@Workflow({ name: 'cls-ledger' })
class ClsLedgerWorkflow {
  static failFirst = new Set<string>();
  static seen = new Map<string, Seen>();

  constructor(private readonly payments: ClsPaymentRepository) {}

  async run(input: { id: string }): Promise<string> {
    return this.debit(input.id);
  }

  @Step({ transaction: true, attempts: 2 })
  async debit(id: string): Promise<string> {
    ClsLedgerWorkflow.seen.set(id, await this.payments.save(id, 'step'));
    if (ClsLedgerWorkflow.failFirst.delete(id)) throw new Error('first attempt fails after writing');
    return `debited ${id}`;
  }
}

async function boot(adapter: AdapterName, schema: string, withWorkflows: boolean): Promise<INestApplication> {
  const app = await create(adapter, schema, withWorkflows);
  await app.init();
  if (adapter === 'fastify') await (app as NestFastifyApplication).getHttpAdapter().getInstance().ready();
  return app;
}

async function create(adapter: AdapterName, schema: string, withWorkflows: boolean): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({
    imports: clsAppImports({
      databaseUrl: databaseUrl(),
      schema,
      idempotency: {
        redis: { url: redisUrl(), keyPrefix: `idem-${schema}` },
        ...(withWorkflows ? { workflows: { ...FAST, queuePrefix: uniquePrefix() } } : {}),
      },
    }),
    controllers: [ChargeController],
    providers: [ClsPaymentRepository, ClsLedgerRepository, ClsBilling, ...(withWorkflows ? [ClsLedgerWorkflow] : [])],
  }).compile();
  const app = adapter === 'fastify' ? moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter()) : moduleRef.createNestApplication();
  app.useLogger(false);
  return app;
}

const rowsIn = (schema: string) => async (id: string): Promise<number> =>
  Number((await sql<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".cls_payments WHERE charge_id = $1`, [id]))[0].n);

describe.each(ADAPTERS)('@nestjs-cls/transactional: a TransactionHost repository in an @Idempotent({ transaction: true }) route (%s)', (adapter) => {
  const schema = uniqueSchema('cls');
  const rows = rowsIn(schema);
  let app: INestApplication;

  beforeAll(async () => {
    await sql(CLS_PAYMENTS_DDL(schema));
    app = await boot(adapter, schema, false);
  });

  afterAll(async () => {
    await app?.close();
  });

  it('writes through txHost.tx in the library transaction: committed with the response, once', async () => {
    const first = await request(app.getHttpServer()).post('/cls/charges').set('Idempotency-Key', 'h1').send({});
    expect(first.status).toBe(201);
    expect(first.body).toEqual({ sameAsLibrary: true, pluginActive: true });
    const replay = await request(app.getHttpServer()).post('/cls/charges').set('Idempotency-Key', 'h1').send({});
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(await rows('h1')).toBe(1);
  });

  it('rolls the txHost.tx write back when the handler throws; the retry writes once', async () => {
    const failed = await request(app.getHttpServer()).post('/cls/charges').set('Idempotency-Key', 'h2').send({ fail: 'card declined' });
    expect(failed.status).toBe(500);
    expect(await rows('h2')).toBe(0);
    const retried = await request(app.getHttpServer()).post('/cls/charges').set('Idempotency-Key', 'h2').send({});
    expect(retried.status).toBe(201);
    expect(await rows('h2')).toBe(1);
  });
});

describe('@nestjs-cls/transactional on the other faces, and where the library opens no transaction', () => {
  const schema = uniqueSchema('clsf');
  const rows = rowsIn(schema);
  let app: INestApplication;
  let payments: ClsPaymentRepository;

  beforeAll(async () => {
    await sql(CLS_PAYMENTS_DDL(schema));
    app = await boot('express', schema, true);
    payments = app.get(ClsPaymentRepository);
  });

  afterAll(async () => {
    await app?.close();
  });

  it('@IdempotentMethod({ transaction: true }): a @Transactional() repository method joins; a throw rolls its write back', async () => {
    const billing = app.get(ClsBilling);
    await expect(billing.charge('m1', 'card declined')).rejects.toThrow('card declined');
    expect(await rows('m1')).toBe(0);
    expect(await billing.charge('m1')).toEqual({ sameAsLibrary: true, pluginActive: true });
    expect(await billing.charge('m1')).toEqual({ sameAsLibrary: true, pluginActive: true }); // the stored result
    expect(await rows('m1')).toBe(1);
  });

  it('@Step({ transaction: true }): an attempt that throws after writing leaves nothing; the retry writes once', async () => {
    ClsLedgerWorkflow.failFirst.add('s1');
    const handle = await app.get(WorkflowClient).start(ClsLedgerWorkflow, { id: 's1' }, { workflowId: 'cls-s1' });
    expect(await handle.result({ timeout: '60s' })).toBe('debited s1');
    expect(ClsLedgerWorkflow.failFirst.has('s1')).toBe(false);
    expect(ClsLedgerWorkflow.seen.get('s1')).toEqual({ sameAsLibrary: true, pluginActive: true });
    expect(await rows('s1')).toBe(1);
  });

  it('IdempotencyService.run(): a named connection with @InjectTransaction() joins too, and a Nested @Transactional() is a savepoint in it', async () => {
    const engine = app.get(IdempotencyService);
    const ledger = app.get(ClsLedgerRepository);
    const charge = (fail?: string) => engine.run('r1', async () => {
      const seen = [await ledger.save('r1', 'named'), await payments.saveNested('r1', 'nested')];
      await expect(payments.saveNested('r1', 'nested-undone', 'undone')).rejects.toThrow('undone'); // back to its savepoint only
      if (fail) throw new Error(fail);
      return seen;
    }, { transaction: true });
    const count = async (face: string) => Number((await sql<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".cls_payments WHERE charge_id = 'r1' AND face = $1`, [face]))[0].n);
    await expect(charge('card declined')).rejects.toThrow('card declined');
    expect(await rows('r1')).toBe(0);
    const bound = { sameAsLibrary: true, pluginActive: true };
    expect(await charge()).toEqual([bound, bound]);
    expect([await count('named'), await count('nested'), await count('nested-undone')]).toEqual([1, 1, 0]);
  });

  it('inbox handler: txHost.tx is the inbox transaction; a throw rolls back both, a duplicate is skipped', async () => {
    const inbox = app.get(InboxService);
    await expect(inbox.process('i1', 'cls', async () => {
      await payments.save('i1', 'inbox');
      throw new Error('handler failed');
    })).rejects.toThrow('handler failed');
    expect(await rows('i1')).toBe(0);
    expect(await inbox.process('i1', 'cls', () => payments.save('i1', 'inbox'))).toEqual({ status: 'processed', result: { sameAsLibrary: true, pluginActive: true } });
    expect(await inbox.process('i1', 'cls', () => payments.save('i1', 'inbox'))).toEqual({ status: 'duplicate' });
    expect(await rows('i1')).toBe(1);
  });

  it('without a transaction of the library the plugin works as before: its own commit and rollback, nothing left bound', async () => {
    expect(payments.active).toBe(false);
    expect(payments.fallback).toBe(app.get(getDataSourceToken()).manager);
    expect(await payments.saveTransactional('p1', 'plain')).toEqual({ sameAsLibrary: false, pluginActive: true });
    expect(await rows('p1')).toBe(1);
    await expect(payments.saveTransactional('p2', 'plain', 'rolled back')).rejects.toThrow('rolled back');
    expect(await rows('p2')).toBe(0);
    await payments.save('p3', 'plain'); // no transaction at all: the DataSource's manager, autocommit
    expect(await rows('p3')).toBe(1);
    // the plugin's own transaction is not the library's: currentTransaction() still says how to turn the mode on
    await expect(app.get(TransactionHost).withTransaction(() => Promise.resolve(currentTransaction()))).rejects.toBeInstanceOf(NotInTransactionError);
  });

  it('a plugin bound to another DataSource than the library\'s fails at startup, naming postgres.dataSource', async () => {
    const other = uniqueSchema('clsx');
    const moduleRef = await Test.createTestingModule({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl(), schema: other, entities: [], extra: { allowExitOnIdle: true } }),
        ClsModule.forRoot({
          global: true,
          plugins: [new ClsPluginTransactional({ adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: getDataSourceToken() }) })],
        }),
        IdempotencyModule.forRoot({ postgres: { url: databaseUrl(), schema: other }, redis: false, migrationsRun: true }),
      ],
    }).compile();
    const misconfigured = moduleRef.createNestApplication({ logger: false });
    try {
      const failure = await misconfigured.init().then(() => undefined, (err: unknown) => err);
      expect(failure).toBeInstanceOf(IdempotencyConfigError);
      expect((failure as Error).message).toMatch(/postgres\.dataSource: @nestjs-cls\/transactional's TransactionalAdapterTypeOrm \(connection "default"\) uses another TypeORM DataSource/);
    } finally {
      await misconfigured.close();
      await sql(`DROP SCHEMA IF EXISTS "${other}" CASCADE`);
    }
  });

  it('a plugin on another database than the library\'s (records kept apart on purpose) starts; txHost.tx stays the app\'s own', async () => {
    const database = `clsdb_${process.pid}`;
    const appUrl = new URL(databaseUrl());
    appUrl.pathname = `/${database}`;
    const other = uniqueSchema('clsy');
    await sql(`CREATE DATABASE "${database}"`);
    const moduleRef = await Test.createTestingModule({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: appUrl.toString(), entities: [], extra: { allowExitOnIdle: true } }),
        ClsModule.forRoot({
          global: true,
          plugins: [new ClsPluginTransactional({ adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: getDataSourceToken() }) })],
        }),
        IdempotencyModule.forRoot({ postgres: { url: databaseUrl(), schema: other }, redis: false, migrationsRun: true }),
      ],
    }).compile();
    const split = moduleRef.createNestApplication({ logger: false });
    try {
      await split.init();
      const host = split.get<TransactionHost>(TransactionHost);
      const inside = await split.get(IdempotencyService).run('split-1', () => Promise.resolve(host.tx === currentTransaction()), { transaction: true });
      expect(inside).toBe(false);
    } finally {
      await split.close();
      await sql(`DROP SCHEMA IF EXISTS "${other}" CASCADE`);
      await sql(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`);
    }
  });

  it('a plugin that does not see the bound transaction (another version, a second nestjs-cls copy) fails at startup', async () => {
    jest.spyOn(TransactionHost.prototype as unknown as { setTxInstance: () => void }, 'setTxInstance').mockImplementation(() => undefined);
    const blind = await create('express', schema, false);
    try {
      await expect(blind.init()).rejects.toThrow(/Unsupported @nestjs-cls\/transactional setup:\n.*TransactionHost of connection "default", "ledger" did not return the transaction/);
    } finally {
      jest.restoreAllMocks();
      await blind.close();
    }
  });

  it('SIGKILL after the txHost.tx write and before commit leaves nothing; the retry on another instance writes once', async () => {
    const scenario = { schema, prefix: uniquePrefix(), databaseUrl: databaseUrl(), redisUrl: redisUrl() };
    const child = spawnWorker(scenario, { IDEM_SCHEMA: schema }, join(__dirname, 'fixtures', 'cls-crash-app.ts'));
    try {
      const listening = await child.line('LISTENING ');
      void request(listening.slice('LISTENING '.length)).post('/cls/charges').set('Idempotency-Key', 'k-crash').send({}).then(() => undefined, () => undefined);
      await child.line('WROTE k-crash', 30_000);
    } finally {
      child.proc.kill('SIGKILL');
      await child.exited;
    }
    expect(await rows('k-crash')).toBe(0);
    const url = await listen(app);
    const retried = await waitUntil('the dead holder lease lapsed and the retry ran', async () => {
      const res = await request(url).post('/cls/charges').set('Idempotency-Key', 'k-crash').send({});
      return res.status === 201 ? res : undefined;
    }, { timeoutMs: 30_000, intervalMs: 200 });
    expect(retried.headers['idempotent-replayed']).toBeUndefined();
    expect(retried.body).toEqual({ sameAsLibrary: true, pluginActive: true });
    expect(await rows('k-crash')).toBe(1);
  });
});
