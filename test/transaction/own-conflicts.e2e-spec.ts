// A transaction of the library that Postgres aborts for a conflict under the work's OWN statement (a serialization
// failure or a deadlock raised by the handler's, the method's or the step's query, not at the library's COMMIT):
// nothing of it committed, so it is treated as a conflict at the COMMIT is — the method and the step run again in
// place (no failure stored, no step attempt spent), the route answers 409 `transaction-conflict` and its key is free,
// and the inbox processes the message again in place.
// The conflicts are made deterministic by a trigger that raises the first N inserts' SQLSTATE (a sequence counts
// them: nextval is not rolled back with the transaction).
import { Body, Controller, INestApplication, INestApplicationContext, Post } from '@nestjs/common';
import request from 'supertest';
import { currentStep, currentTransaction, Idempotent, IdempotencyService, InboxService, PROBLEM_CONTENT_TYPE, Step, Workflow, WorkflowClient } from '../../lib';
import { MAX_CONFLICT_RUNS } from '../../lib/transaction/transaction-conflicts';
import { listen } from '../support/resilience';
import { ADAPTERS, createEngineContext, createTestApp, sql, uniqueSchema } from '../support/test-app';
import { bootWorkflowApp, scenario } from '../workflow/support';

type ConflictCode = 'serialization_failure' | 'deadlock_detected';

/** The table the work inserts into, the runs of the work, and the attempts its step saw. */
const effects = { table: '', runs: 0, stepAttempts: [] as number[] };

async function createEffects(schema: string): Promise<void> {
  effects.table = `"${schema}".effects`;
  await sql(`CREATE SCHEMA IF NOT EXISTS "${schema}";
    CREATE TABLE ${effects.table} (id serial PRIMARY KEY, k text NOT NULL);
    CREATE TABLE "${schema}".planned (n int NOT NULL, code text NOT NULL); INSERT INTO "${schema}".planned VALUES (0, 'serialization_failure');
    CREATE SEQUENCE "${schema}".inserts;
    CREATE FUNCTION "${schema}".conflict_first() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE plan record;
      BEGIN
        SELECT n, code INTO plan FROM "${schema}".planned;
        IF nextval('"${schema}".inserts') <= plan.n THEN
          IF plan.code = 'deadlock_detected' THEN RAISE EXCEPTION 'simulated deadlock' USING ERRCODE = 'deadlock_detected'; END IF;
          RAISE EXCEPTION 'simulated conflict' USING ERRCODE = 'serialization_failure';
        END IF;
        RETURN NEW;
      END $$;
    CREATE TRIGGER conflict_first BEFORE INSERT ON ${effects.table} FOR EACH ROW EXECUTE FUNCTION "${schema}".conflict_first()`);
}

/** The next `n` inserts into the effects table fail with `code`, as Postgres would abort them for a conflict. */
async function planConflicts(schema: string, n: number, code: ConflictCode = 'serialization_failure'): Promise<void> {
  await sql(`UPDATE "${schema}".planned SET n = $1, code = $2`, [n, code]);
  await sql(`ALTER SEQUENCE "${schema}".inserts RESTART WITH 1; TRUNCATE ${effects.table}`);
  effects.runs = 0;
  effects.stepAttempts = [];
}

async function insertEffect(k: string): Promise<string> {
  effects.runs++;
  await currentTransaction().query(`INSERT INTO ${effects.table} (k) VALUES ($1)`, [k]);
  return `inserted ${k}`;
}

const effectRows = () => sql<{ k: string; n: number }>(`SELECT k, count(*)::int AS n FROM ${effects.table} GROUP BY k ORDER BY k`);

describe('IdempotencyService.run({ transaction: true }) whose own statement is aborted for a conflict', () => {
  const schema = uniqueSchema('ocm');
  let app: INestApplicationContext;
  let engine: IdempotencyService;

  beforeAll(async () => {
    await createEffects(schema);
    app = await createEngineContext(schema);
    engine = app.get(IdempotencyService);
  });

  afterAll(async () => {
    await app?.close();
    await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });

  const call = (key: string, onFailure: 'unlock' | 'lock' = 'unlock') =>
    engine.run(key, () => insertEffect(key), { transaction: true, isolation: 'serializable', onFailure });

  it.each([['serialization_failure' as const], ['deadlock_detected' as const]])('runs the call again in place after a %s: it returns, its write is committed once', async (code) => {
    await planConflicts(schema, 2, code);
    await expect(call(`m-${code}`)).resolves.toBe(`inserted m-${code}`);
    expect(effects.runs).toBe(3);
    expect(await effectRows()).toEqual([{ k: `m-${code}`, n: 1 }]);
    // Stored as the call's result: a duplicate replays it without running.
    await expect(call(`m-${code}`)).resolves.toBe(`inserted m-${code}`);
    expect(effects.runs).toBe(3);
  });

  it('stores no failure for the conflict under onFailure "lock": the call runs again and its result is what stays', async () => {
    await planConflicts(schema, 1);
    await expect(call('m-lock', 'lock')).resolves.toBe('inserted m-lock');
    expect(effects.runs).toBe(2);
    await expect(call('m-lock', 'lock')).resolves.toBe('inserted m-lock');
    expect(effects.runs).toBe(2);
  });

  it('takes a conflict that did not abort its transaction (another connection\'s) as fn\'s own failure: fn runs once', async () => {
    await planConflicts(schema, 0);
    // Postgres's error as another DataSource's transaction would raise it: the library's transaction is still usable.
    const elsewhere = Object.assign(new Error('could not serialize access (another connection)'), { code: '40001', severity: 'ERROR' });
    const failure = await engine.run('m-elsewhere', () => { effects.runs++; throw elsewhere; }, { transaction: true }).catch((err: unknown) => err);
    expect(failure).toBe(elsewhere);
    expect(effects.runs).toBe(1);
  });

  it('inside another transactional call: the inner call\'s savepoint is rolled back, and the outer call, still usable, fails as fn', async () => {
    await planConflicts(schema, 1, 'deadlock_detected');
    let outerRuns = 0;
    const outer = engine.run('m-outer', async () => {
      outerRuns++;
      return engine.run('m-inner', () => insertEffect('m-inner'), { transaction: true });
    }, { transaction: true });
    const failure = await outer.catch((err: unknown) => err);
    expect((failure as { driverError?: { code?: string } }).driverError?.code).toBe('40P01');
    expect([outerRuns, effects.runs]).toEqual([1, 1]);
    // Neither key is held: both calls run when called again (the trigger's plan is spent).
    await expect(engine.run('m-outer', () => engine.run('m-inner', () => insertEffect('m-inner'), { transaction: true }), { transaction: true }))
      .resolves.toBe('inserted m-inner');
    expect(await effectRows()).toEqual([{ k: 'm-inner', n: 1 }]);
  });

  it(`gives up after ${MAX_CONFLICT_RUNS} runs with the statement's own error, storing nothing: the key is free`, async () => {
    await planConflicts(schema, MAX_CONFLICT_RUNS);
    const failure = await call('m-doomed', 'lock').catch((err: unknown) => err);
    expect((failure as { driverError?: { code?: string } }).driverError?.code).toBe('40001');
    expect(effects.runs).toBe(MAX_CONFLICT_RUNS);
    expect(await effectRows()).toEqual([]);
    // Not stored as a failure, even under "lock": the next call runs (the trigger's plan is spent) and commits.
    await expect(call('m-doomed', 'lock')).resolves.toBe('inserted m-doomed');
    expect(await effectRows()).toEqual([{ k: 'm-doomed', n: 1 }]);
  });
});

@Controller()
class EffectController {
  @Post('effects')
  @Idempotent({ transaction: true, isolation: 'serializable' })
  async create(@Body() body: { k: string }): Promise<{ done: string }> {
    return { done: await insertEffect(body.k) };
  }
}

describe.each(ADAPTERS)('a transactional route whose own statement is aborted for a conflict (%s)', (adapter) => {
  const schema = uniqueSchema('och');
  let app: INestApplication;
  let url: string;
  const errors: string[] = [];

  beforeAll(async () => {
    await createEffects(schema);
    app = await createTestApp({ adapter, schema, controllers: [EffectController] });
    app.useLogger({ log: () => undefined, warn: () => undefined, error: (message: unknown) => void errors.push(String(message)) });
    url = await listen(app);
  });

  afterAll(async () => {
    await app?.close();
    await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });

  it('answers 409 transaction-conflict with nothing committed; the retry with the same key runs once and is replayed', async () => {
    effects.table = `"${schema}".effects`;
    await planConflicts(schema, 1);
    const post = () => request(url).post('/effects').set('Idempotency-Key', 'h-own').send({ k: 'h-own' });
    const refused = await post();
    expect(refused.status).toBe(409);
    expect(refused.headers['content-type']).toContain(PROBLEM_CONTENT_TYPE);
    expect(refused.headers['retry-after']).toBe('1');
    expect(JSON.parse(refused.text)).toMatchObject({ status: 409, code: 'transaction-conflict' });
    expect(await effectRows()).toEqual([]);
    // Rolled back whole, claim included: no record of the key, not even a released one.
    expect(await sql(`SELECT status FROM "${schema}".idempotency_records WHERE key = 'h-own'`)).toEqual([]);
    // A routine conflict, not the handler's failure: Nest's exception handler logged no error for it.
    expect(errors).toEqual([]);

    const retry = await post();
    expect(retry.status).toBe(201);
    expect(retry.body).toEqual({ done: 'inserted h-own' });
    const replay = await post();
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body).toEqual({ done: 'inserted h-own' });
    expect(effects.runs).toBe(2);
    expect(await effectRows()).toEqual([{ k: 'h-own', n: 1 }]);
  });
});

@Workflow({ name: 'own-conflict' })
class OwnConflictWorkflow {
  async run(k: string): Promise<string> {
    return k.startsWith('last-') ? this.insertOnce(k) : this.insert(k);
  }

  @Step({ transaction: true, isolation: 'serializable', attempts: 1 })
  async insertOnce(k: string): Promise<string> {
    effects.stepAttempts.push(currentStep().attempt);
    return insertEffect(k);
  }

  @Step({ transaction: true, isolation: 'serializable', attempts: 2 })
  async insert(k: string): Promise<string> {
    effects.stepAttempts.push(currentStep().attempt);
    return insertEffect(k);
  }
}

describe('@Step({ transaction: true }) whose own statement is aborted for a conflict', () => {
  const s = scenario();
  let app: INestApplication;
  let client: WorkflowClient;

  beforeAll(async () => {
    await createEffects(s.schema);
    ({ app, client } = await bootWorkflowApp(s, [OwnConflictWorkflow]));
  });

  afterAll(async () => {
    await app?.close();
  });

  it('runs the step again in place without spending an attempt: more conflicts than attempts, one committed write', async () => {
    effects.table = `"${s.schema}".effects`;
    // Three conflicts against two attempts: were a conflict the step's failure, the workflow would fail.
    await planConflicts(s.schema, 3, 'deadlock_detected');
    const handle = await client.start(OwnConflictWorkflow, 'w-own', { workflowId: 'own-conflict-1' });
    await expect(handle.result({ timeout: '30s' })).resolves.toBe('inserted w-own');
    expect(effects.runs).toBe(4);
    expect(effects.stepAttempts).toEqual([1, 1, 1, 1]);
    expect(await effectRows()).toEqual([{ k: 'w-own', n: 1 }]);
  });

  it(`fails the last attempt after ${MAX_CONFLICT_RUNS} conflicts in a row: the workflow ends failed, the job is not lost`, async () => {
    effects.table = `"${s.schema}".effects`;
    await planConflicts(s.schema, MAX_CONFLICT_RUNS, 'deadlock_detected');
    const handle = await client.start(OwnConflictWorkflow, 'last-own', { workflowId: 'own-conflict-last' });
    await expect(handle.result({ timeout: '30s' })).rejects.toThrow(/simulated deadlock/);
    // One attempt of ten runs: not run again as a lost job (which would start it over, up to maxRecoveryAttempts times).
    expect(effects.runs).toBe(MAX_CONFLICT_RUNS);
    expect(await effectRows()).toEqual([]);
    expect(await sql(`SELECT status FROM "${s.schema}".workflow_steps WHERE name = 'insertOnce'`)).toEqual([{ status: 'failed' }]);
  });
});

describe('InboxService whose handler\'s own statement is aborted for a deadlock', () => {
  const schema = uniqueSchema('oci');
  let app: INestApplicationContext;
  let inbox: InboxService;

  beforeAll(async () => {
    await createEffects(schema);
    app = await createEngineContext(schema, { redis: false });
    inbox = app.get(InboxService);
  });

  afterAll(async () => {
    await app?.close();
    await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });

  const inboxRows = async () => (await sql<{ message_id: string }>(`SELECT message_id FROM "${schema}".inbox_messages ORDER BY message_id`)).map((r) => r.message_id);

  it('process(): runs the handler again in place; the message and its effect are recorded once', async () => {
    effects.table = `"${schema}".effects`;
    await planConflicts(schema, 2, 'deadlock_detected');
    const outcome = await inbox.process('evt-own', 'payments', () => insertEffect('evt-own'));
    expect(outcome).toEqual({ status: 'processed', result: 'inserted evt-own' });
    expect(effects.runs).toBe(3);
    expect(await effectRows()).toEqual([{ k: 'evt-own', n: 1 }]);
    expect(await inboxRows()).toEqual(['evt-own']);
    await expect(inbox.process('evt-own', 'payments', () => insertEffect('evt-own'))).resolves.toEqual({ status: 'duplicate' });
  });

  it('processBatch(): runs the handler again in place with the same fresh messages', async () => {
    effects.table = `"${schema}".effects`;
    await planConflicts(schema, 1, 'deadlock_detected');
    const batch = [{ id: 'b-1' }, { id: 'b-2' }];
    const outcome = await inbox.processBatch(batch, 'payments', async (_manager, fresh) => {
      for (const message of fresh) await insertEffect(message.id);
      return fresh.length;
    });
    expect(outcome).toEqual({ processed: batch, duplicates: [], result: 2 });
    // the first run's first insert was aborted, the second run inserted both
    expect(effects.runs).toBe(3);
    expect(await effectRows()).toEqual([{ k: 'b-1', n: 1 }, { k: 'b-2', n: 1 }]);
    expect(await inboxRows()).toEqual(['b-1', 'b-2', 'evt-own']);
  });

  it(`gives up after ${MAX_CONFLICT_RUNS} runs with the statement's own error; nothing is recorded, so a redelivery runs`, async () => {
    effects.table = `"${schema}".effects`;
    await planConflicts(schema, MAX_CONFLICT_RUNS, 'deadlock_detected');
    const failure = await inbox.process('evt-doomed', 'payments', () => insertEffect('evt-doomed')).catch((err: unknown) => err);
    expect((failure as { driverError?: { code?: string } }).driverError?.code).toBe('40P01');
    expect(effects.runs).toBe(MAX_CONFLICT_RUNS);
    expect(await inboxRows()).not.toContain('evt-doomed');
    await expect(inbox.process('evt-doomed', 'payments', () => insertEffect('evt-doomed'))).resolves.toEqual({ status: 'processed', result: 'inserted evt-doomed' });
  });
});
