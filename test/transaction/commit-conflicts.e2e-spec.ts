// A transaction of the library that Postgres aborts at its completion or COMMIT for a conflict with a concurrent one
// (a serialization failure at 'serializable'): the method guard runs the call again in place, and the HTTP face
// answers 409 problem `transaction-conflict` (its key is free at once, nothing of the request committed).
import { Body, Controller, INestApplication, INestApplicationContext, Post } from '@nestjs/common';
import request from 'supertest';
import { currentTransaction, Idempotent, IdempotencyService, PROBLEM_CONTENT_TYPE, StoreUnavailableError } from '../../lib';
import { MAX_CONFLICT_RUNS } from '../../lib/transaction/transaction-conflicts';
import { gate, listen, waitUntil } from '../support/resilience';
import { ADAPTERS, createEngineContext, createTestApp, sql, uniqueSchema } from '../support/test-app';

/**
 * Reads the rows of `reads`, writes one row of `writes`, then waits until both calls of the test wrote: a write
 * skew, which 'serializable' refuses to commit twice. Returns how many rows of `reads` it saw.
 */
const skew = { table: '', wrote: 0, bothWrote: gate(), runs: 0 };
async function moveInTransaction(reads: string, writes: string): Promise<number> {
  skew.runs++;
  const [{ n }] = await currentTransaction().query<Array<{ n: number }>>(`SELECT count(*)::int AS n FROM ${skew.table} WHERE k = $1`, [reads]);
  await currentTransaction().query(`INSERT INTO ${skew.table} (k) VALUES ($1)`, [writes]);
  skew.wrote++;
  await skew.bothWrote.promise;
  return n;
}
function resetSkew(): void {
  Object.assign(skew, { wrote: 0, bothWrote: gate(), runs: 0 });
}
const skewRows = () => sql<{ k: string; n: number }>(`SELECT k, count(*)::int AS n FROM ${skew.table} GROUP BY k ORDER BY k`);

describe('a serialization conflict at the COMMIT of IdempotencyService.run({ transaction: true })', () => {
  const schema = uniqueSchema('cfm');
  let app: INestApplicationContext;
  let engine: IdempotencyService;

  beforeAll(async () => {
    skew.table = `"${schema}".skew`;
    await sql(`CREATE SCHEMA "${schema}"; CREATE TABLE ${skew.table} (id serial PRIMARY KEY, k text NOT NULL)`);
    app = await createEngineContext(schema);
    engine = app.get(IdempotencyService);
  });

  afterAll(async () => {
    await app?.close();
    await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });

  beforeEach(async () => {
    resetSkew();
    await sql(`TRUNCATE ${skew.table}`);
  });

  const call = (key: string, reads: string, writes: string) =>
    engine.run(key, () => moveInTransaction(reads, writes), { transaction: true, isolation: 'serializable' });

  it('runs the losing call again in place: both calls return, each write is committed once', async () => {
    const runs = jest.spyOn(engine as unknown as { runOnce: () => Promise<unknown> }, 'runOnce');
    const one = call('m-1', 'a', 'b');
    const two = call('m-2', 'b', 'a');
    await waitUntil('both calls read and wrote', () => skew.wrote === 2);
    skew.bothWrote.open();
    // The loser ran again after the winner committed, and so saw the winner's row.
    expect((await Promise.all([one, two])).sort()).toEqual([0, 1]);
    expect(skew.runs).toBe(3);
    expect(runs).toHaveBeenCalledTimes(3);
    runs.mockRestore();
    expect(await skewRows()).toEqual([{ k: 'a', n: 1 }, { k: 'b', n: 1 }]);
    // Each key holds its call's stored result: a duplicate replays it without running.
    const replayed = await Promise.all([call('m-1', 'a', 'b'), call('m-2', 'b', 'a')]);
    expect(replayed.sort()).toEqual([0, 1]);
    expect(skew.runs).toBe(3);
  });

  it(`gives up after ${MAX_CONFLICT_RUNS} runs that all conflicted, with the conflict as the cause`, async () => {
    // Every COMMIT of the call fails as a conflict would: a deferred constraint trigger raising 40001 at COMMIT.
    await sql(`CREATE OR REPLACE FUNCTION "${schema}".always_conflict() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'simulated conflict' USING ERRCODE = 'serialization_failure'; END $$`);
    await sql(`CREATE CONSTRAINT TRIGGER always_conflict AFTER INSERT ON ${skew.table} DEFERRABLE INITIALLY DEFERRED
      FOR EACH ROW WHEN (NEW.k = 'doomed') EXECUTE FUNCTION "${schema}".always_conflict()`);
    try {
      skew.bothWrote.open();
      const failure = await call('m-doomed', 'x', 'doomed').catch((err: unknown) => err);
      expect(failure).toBeInstanceOf(StoreUnavailableError);
      expect(((failure as StoreUnavailableError).cause as { code?: string }).code).toBe('40001');
      expect(skew.runs).toBe(MAX_CONFLICT_RUNS);
      expect(await skewRows()).toEqual([]);
      // Nothing of it committed, the claim included: the key is free for the next call.
      await sql(`DROP TRIGGER always_conflict ON ${skew.table}`);
      expect(await call('m-doomed', 'x', 'doomed')).toBe(0);
      expect(await skewRows()).toEqual([{ k: 'doomed', n: 1 }]);
    } finally {
      await sql(`DROP TRIGGER IF EXISTS always_conflict ON ${skew.table}`);
    }
  });
});

interface MoveBody {
  reads: string;
  writes: string;
}

@Controller()
class MoveController {
  @Post('moves')
  @Idempotent({ transaction: true, isolation: 'serializable' })
  async move(@Body() body: MoveBody): Promise<{ saw: number }> {
    return { saw: await moveInTransaction(body.reads, body.writes) };
  }
}

describe.each(ADAPTERS)('a serialization conflict at the COMMIT of a transactional route (%s)', (adapter) => {
  const schema = uniqueSchema('cfh');
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    skew.table = `"${schema}".skew`;
    await sql(`CREATE SCHEMA "${schema}"; CREATE TABLE ${skew.table} (id serial PRIMARY KEY, k text NOT NULL)`);
    app = await createTestApp({ adapter, schema, controllers: [MoveController] });
    url = await listen(app);
  });

  afterAll(async () => {
    await app?.close();
    await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });

  it('answers the loser 409 transaction-conflict; its retry with the same key runs and commits once', async () => {
    resetSkew();
    skew.table = `"${schema}".skew`;
    const post = (key: string, body: MoveBody) => request(url).post('/moves').set('Idempotency-Key', key).send(body);
    // supertest sends a request once it is awaited: `then` sends both now.
    const sent = [post('h-1', { reads: 'a', writes: 'b' }), post('h-2', { reads: 'b', writes: 'a' })].map((test) => test.then((res) => res));
    await waitUntil('both requests read and wrote', () => skew.wrote === 2);
    skew.bothWrote.open();
    const answers = await Promise.all(sent);
    const won = answers.findIndex((r) => r.status === 201);
    const lost = answers.findIndex((r) => r.status === 409);
    expect([won, lost].sort()).toEqual([0, 1]);
    expect(answers[won].body).toEqual({ saw: 0 });
    const problem = answers[lost];
    expect(problem.headers['content-type']).toContain(PROBLEM_CONTENT_TYPE);
    expect(problem.headers['retry-after']).toBe('1');
    expect(JSON.parse(problem.text)).toMatchObject({ status: 409, code: 'transaction-conflict' });
    expect(await skewRows()).toEqual([{ k: won === 0 ? 'b' : 'a', n: 1 }]);

    const lostKey = lost === 0 ? 'h-1' : 'h-2';
    const retry = await post(lostKey, lost === 0 ? { reads: 'a', writes: 'b' } : { reads: 'b', writes: 'a' });
    expect(retry.status).toBe(201);
    expect(retry.body).toEqual({ saw: 1 });
    expect(await skewRows()).toEqual([{ k: 'a', n: 1 }, { k: 'b', n: 1 }]);
    const replay = await post(lostKey, lost === 0 ? { reads: 'a', writes: 'b' } : { reads: 'b', writes: 'a' });
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body).toEqual({ saw: 1 });
    expect(skew.runs).toBe(3);
  });
});
