// A transactional handler, method or step that catches a failed statement's error and returns: Postgres aborted its
// transaction at that statement, so nothing of it can commit (not its writes, its claim or its outcome). That is the
// work's defect, reported as TransactionAbortedError (route: 500 problem `transaction-aborted`) with the statement's
// error as its cause — not as a store outage (503 / StoreUnavailableError), which it was before. A savepoint
// (`currentTransaction().transaction(…)`) still lets the work recover from a failed statement and commit the rest.
import { Body, Controller, INestApplication, INestApplicationContext, Post } from '@nestjs/common';
import request from 'supertest';
import { currentStep, currentTransaction, Idempotent, IdempotencyService, PROBLEM_CONTENT_TYPE, Step, TransactionAbortedError, Workflow, WorkflowClient } from '../../lib';
import { listen } from '../support/resilience';
import { ADAPTERS, createEngineContext, createTestApp, sql, uniqueSchema } from '../support/test-app';
import { bootWorkflowApp, scenario } from '../workflow/support';

/** The table the work inserts into, and the step attempts seen. */
const effects = { table: '', stepAttempts: [] as number[] };

const createEffects = (schema: string) =>
  sql(`CREATE SCHEMA IF NOT EXISTS "${schema}"; CREATE TABLE "${schema}".effects (id serial PRIMARY KEY, k text NOT NULL)`);

const effectRows = async () => (await sql<{ k: string }>(`SELECT k FROM ${effects.table} ORDER BY id`)).map((r) => r.k);

/** Inserts `k`, then runs a statement that fails (division by zero) and goes on: in a savepoint when `savepoint`. */
async function insertThenSwallow(k: string, savepoint = false): Promise<string> {
  const manager = currentTransaction();
  await manager.query(`INSERT INTO ${effects.table} (k) VALUES ($1)`, [k]);
  const failing = savepoint
    ? manager.transaction((inner) => inner.query<unknown[]>('SELECT 1 / 0'))
    : manager.query<unknown[]>('SELECT 1 / 0');
  await failing.catch(() => undefined);
  return `inserted ${k}`;
}

const DIVISION_BY_ZERO = '22012';
const causeCode = (err: unknown) => ((err as Error).cause as { code?: string } | undefined)?.code;

describe('IdempotencyService.run({ transaction: true }) whose fn catches a failed statement and returns', () => {
  const schema = uniqueSchema('cse');
  let app: INestApplicationContext;
  let engine: IdempotencyService;

  beforeAll(async () => {
    await createEffects(schema);
    effects.table = `"${schema}".effects`;
    app = await createEngineContext(schema);
    engine = app.get(IdempotencyService);
  });

  afterAll(async () => {
    await app?.close();
    await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });

  it('throws TransactionAbortedError with the statement\'s error as cause; nothing committed, the key is free', async () => {
    effects.table = `"${schema}".effects`;
    const failure = await engine.run('m-swallow', () => insertThenSwallow('m-swallow'), { transaction: true, onFailure: 'lock' }).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(TransactionAbortedError);
    expect((failure as TransactionAbortedError).code).toBe('TRANSACTION_ABORTED');
    expect((failure as Error).message).toMatch(/m-swallow.*IdempotencyService\.run\(\).*division by zero.*savepoint/s);
    expect(causeCode(failure)).toBe(DIVISION_BY_ZERO);
    expect(await effectRows()).toEqual([]);
    expect(await sql(`SELECT status FROM "${schema}".idempotency_records WHERE key = 'm-swallow'`)).toEqual([]);
    // Not stored as a failure, even under onFailure "lock": the key runs again.
    await expect(engine.run('m-swallow', () => insertThenSwallow('m-swallow', true), { transaction: true, onFailure: 'lock' })).resolves.toBe('inserted m-swallow');
    expect(await effectRows()).toEqual(['m-swallow']);
  });
});

@Controller()
class SwallowingController {
  @Post('swallow')
  @Idempotent({ transaction: true })
  async create(@Body() body: { k: string; savepoint?: boolean }): Promise<{ done: string }> {
    return { done: await insertThenSwallow(body.k, body.savepoint) };
  }
}

describe.each(ADAPTERS)('a transactional route whose handler catches a failed statement and answers (%s)', (adapter) => {
  const schema = uniqueSchema('csh');
  let app: INestApplication;
  let url: string;
  const errors: string[] = [];

  beforeAll(async () => {
    await createEffects(schema);
    app = await createTestApp({ adapter, schema, controllers: [SwallowingController] });
    app.useLogger({ log: () => undefined, warn: () => undefined, error: (message: unknown) => void errors.push(String(message)) });
    url = await listen(app);
  });

  afterAll(async () => {
    await app?.close();
    await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });

  it('answers 500 problem transaction-aborted, logs the cause, commits nothing; the key is free', async () => {
    effects.table = `"${schema}".effects`;
    const post = (savepoint: boolean) => request(url).post('/swallow').set('Idempotency-Key', 'h-swallow').send({ k: 'h-swallow', savepoint });
    const refused = await post(false);
    expect(refused.status).toBe(500);
    expect(refused.headers['content-type']).toContain(PROBLEM_CONTENT_TYPE);
    expect(JSON.parse(refused.text)).toMatchObject({ status: 500, code: 'transaction-aborted' });
    expect(await effectRows()).toEqual([]);
    expect(await sql(`SELECT status FROM "${schema}".idempotency_records WHERE key = 'h-swallow'`)).toEqual([]);
    // The log says what failed and what to change: not an outage of the store.
    expect(errors.join('\n')).toMatch(/division by zero.*savepoint/s);
    expect(errors.join('\n')).not.toMatch(/unavailable/);

    // The key is free: the request with the statement in a savepoint commits its insert and is replayed.
    const fixed = await post(true);
    expect(fixed.status).toBe(201);
    expect(fixed.body).toEqual({ done: 'inserted h-swallow' });
    const replay = await post(true);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(await effectRows()).toEqual(['h-swallow']);
  });
});

@Workflow({ name: 'caught-statement-error' })
class SwallowingWorkflow {
  async run(k: string): Promise<string> {
    return this.insert(k);
  }

  @Step({ transaction: true, attempts: 2, backoff: { type: 'fixed', delay: 10 } })
  async insert(k: string): Promise<string> {
    effects.stepAttempts.push(currentStep().attempt);
    return insertThenSwallow(k);
  }
}

describe('@Step({ transaction: true }) that catches a failed statement and returns', () => {
  const s = scenario();
  let app: INestApplication;
  let client: WorkflowClient;

  beforeAll(async () => {
    await createEffects(s.schema);
    ({ app, client } = await bootWorkflowApp(s, [SwallowingWorkflow]));
  });

  afterAll(async () => {
    await app?.close();
  });

  it('fails each attempt with TransactionAbortedError: the last one is checkpointed, nothing committed, the job not lost', async () => {
    effects.table = `"${s.schema}".effects`;
    effects.stepAttempts = [];
    const handle = await client.start(SwallowingWorkflow, 'w-swallow', { workflowId: 'caught-statement-error-1' });
    await expect(handle.result({ timeout: '30s' })).rejects.toThrow(/returned, but a statement it ran in the transaction had failed \(division by zero\)/);
    // Two attempts, each once: not run again as a lost job.
    expect(effects.stepAttempts).toEqual([1, 2]);
    expect(await effectRows()).toEqual([]);
    expect(await sql(`SELECT status FROM "${s.schema}".workflow_steps WHERE name = 'insert'`)).toEqual([{ status: 'failed' }]);
  });
});
