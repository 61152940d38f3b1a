import { INestApplication } from '@nestjs/common';
import { randomBytes, randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { Claim, ClaimOutcome, ClaimRequest, IdempotencyStore } from '../../lib';
import { IdempotencyConnections } from '../../lib/storage/idempotency-connections';
import { BATCH_LOCK_TIMEOUT_MS } from '../../lib/storage/postgres/idempotency.sql';
import { PgStatementCounter, withPort } from '../support/pg-statement-counter';
import { createTestApp, databaseUrl, sql, uniqueSchema } from '../support/test-app';

jest.setTimeout(60_000);

const SCOPE = 'batched';

function fresh(overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return { scope: SCOPE, key: randomUUID(), fingerprint: 'fp-a', leaseMs: 30_000, ttlMs: 60_000, ...overrides };
}

function claimOf(outcome: ClaimOutcome): Claim {
  if (outcome.kind !== 'acquired') throw new Error(`expected to acquire the key, got ${outcome.kind}`);
  return outcome.claim;
}

/** Settles to 'pending' when `promise` has not settled by the time a round trip to Postgres has. */
async function stateOf(promise: Promise<unknown>): Promise<'settled' | 'pending'> {
  let settled = false;
  promise.then(() => (settled = true), () => (settled = true));
  await sql('SELECT 1');
  return settled ? 'settled' : 'pending';
}

// Claims (and completions) made in one turn share one statement, one round trip and one commit; each caller still
// gets the answer it would get alone, and one request's trouble stays its own.
describe('Postgres store: claims, completions and reads of one turn share a statement', () => {
  const schema = uniqueSchema('batch');
  const table = `"${schema}".idempotency_records`;
  let counter: PgStatementCounter;
  let app: INestApplication;
  let other: INestApplication;
  let store: IdempotencyStore;

  beforeAll(async () => {
    counter = new PgStatementCounter(Number(new URL(databaseUrl()).port));
    const url = withPort(databaseUrl(), await counter.listen());
    app = await createTestApp({ adapter: 'express', schema, controllers: [], options: { postgres: { url, schema }, redis: false } });
    other = await createTestApp({ adapter: 'express', schema, controllers: [], options: { redis: false } });
    store = app.get(IdempotencyStore);
  });
  afterAll(async () => {
    await other?.close();
    await app?.close();
    await counter?.close();
  });

  it('twenty claims of one turn are one statement, and so are their twenty completions', async () => {
    const requests = Array.from({ length: 20 }, () => fresh());
    const before = counter.count;
    const claims = (await Promise.all(requests.map((r) => store.claim(r)))).map(claimOf);
    expect(counter.count - before).toBe(1);

    const between = counter.count;
    const records = await Promise.all(claims.map((c, i) => store.complete(c, { n: i })));
    expect(counter.count - between).toBe(1);
    records.forEach((record, i) => {
      expect(record).toMatchObject({ fingerprint: 'fp-a', result: { n: i } });
      expect(record?.expiresAt).toBeGreaterThan(Date.now() + 50_000);
    });
    const found = await Promise.all(requests.map((r) => store.find(r.scope, r.key)));
    found.forEach((f, i) => expect(f).toMatchObject({ kind: 'completed', record: { result: { n: i } } }));
  });

  it('each claim of a batch gets the answer it would get alone', async () => {
    const done = fresh();
    await store.complete(claimOf(await store.claim(done)), 'first');
    const held = fresh();
    claimOf(await store.claim(held));
    const released = fresh();
    await store.release(claimOf(await store.claim(released)), { message: 'failed' });
    const expired = fresh({ leaseMs: 1, ttlMs: 1 });
    claimOf(await store.claim(expired));
    await sql(`UPDATE ${table} SET locked_until = now() - interval '1 s', expires_at = now() - interval '1 s' WHERE key = $1`, [expired.key]);
    const newKey = fresh();

    const before = counter.count;
    const [replay, heldSame, heldOther, retried, takenOver, acquired] = await Promise.all([
      store.claim(done),
      store.claim(held),
      store.claim({ ...held, fingerprint: 'fp-b' }),
      store.claim(released),
      store.claim(expired),
      store.claim(newKey),
    ]);
    expect(replay).toMatchObject({ kind: 'completed', record: { fingerprint: 'fp-a', result: 'first' } });
    expect(heldSame).toMatchObject({ kind: 'in_progress', fingerprint: 'fp-a' });
    // The second claim of `held` did not share the statement (one key per statement): it went on its own.
    expect(heldOther).toMatchObject({ kind: 'in_progress', fingerprint: 'fp-a' });
    expect(retried).toMatchObject({ kind: 'acquired', takenOver: false });
    expect(takenOver).toMatchObject({ kind: 'acquired', takenOver: true });
    expect(acquired).toMatchObject({ kind: 'acquired', takenOver: false });
    expect(counter.count - before).toBe(2);
  });

  it('the same key twice in one turn: one caller acquires it, the other finds it in progress', async () => {
    const req = fresh();
    const outcomes = await Promise.all([store.claim(req), store.claim(fresh()), store.claim(req)]);
    expect([outcomes[0].kind, outcomes[2].kind].sort()).toEqual(['acquired', 'in_progress']);
    expect(outcomes[1].kind).toBe('acquired');
    const [{ n }] = await sql<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE key = $1`, [req.key]);
    expect(n).toBe(1);
  });

  it("a key held by another open transaction does not hold up the rest of its batch", async () => {
    const blocked = fresh();
    const holder = new Client({ connectionString: databaseUrl() });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(
        `INSERT INTO ${table} (scope, key, fingerprint, status, lease_token, locked_until, expires_at)
         VALUES ($1, $2, 'fp-a', 'in_progress', $3, now() + interval '30 s', now() + interval '60 s')`,
        [blocked.scope, blocked.key, randomUUID()],
      );
      const others = [fresh(), fresh(), fresh()];
      const waiting = store.claim(blocked);
      const answers = await Promise.all(others.map((r) => store.claim(r)));
      answers.forEach((a) => expect(a.kind).toBe('acquired'));
      expect(await stateOf(waiting)).toBe('pending');

      await holder.query('ROLLBACK');
      expect(await waiting).toMatchObject({ kind: 'acquired' });
    } finally {
      await holder.end();
    }
  });

  it('a claim that Postgres refuses fails alone; the others of its batch are acquired', async () => {
    const bad = fresh({ key: `nul\u0000key` });
    const good = [fresh(), fresh()];
    const [badOutcome, ...goodOutcomes] = await Promise.allSettled([store.claim(bad), ...good.map((r) => store.claim(r))]);
    expect(badOutcome.status).toBe('rejected');
    expect(badOutcome.status === 'rejected' && (badOutcome.reason as { code?: string }).code).toBe('22021');
    for (const o of goodOutcomes) expect(o).toMatchObject({ status: 'fulfilled', value: { kind: 'acquired' } });
  });

  it('a completion that Postgres refuses fails alone; one whose claim was lost gets null; the others complete', async () => {
    const claims = (await Promise.all([fresh(), fresh(), fresh(), fresh()].map((r) => store.claim(r)))).map(claimOf);
    const [refused, lost, ...kept] = claims;
    await sql(`UPDATE ${table} SET lease_token = $2 WHERE id = $1`, [lost.id, randomUUID()]);

    const before = counter.count;
    const settled = await Promise.allSettled([
      store.complete(refused, { text: 'nul \u0000 inside' }),
      store.complete(lost, 'lost'),
      ...kept.map((c) => store.complete(c, 'kept')),
    ]);
    expect(settled[0].status).toBe('rejected');
    expect(settled[1]).toEqual({ status: 'fulfilled', value: null });
    for (const s of settled.slice(2)) expect(s).toMatchObject({ status: 'fulfilled', value: { result: 'kept' } });
    // The batch, then each completion on its own.
    expect(counter.count - before).toBe(1 + settled.length);
    const rows = await sql<{ id: string; status: string }>(`SELECT id::text, status FROM ${table} WHERE id = ANY($1::bigint[])`, [claims.map((c) => c.id)]);
    const status = new Map(rows.map((r) => [r.id, r.status]));
    expect([refused, lost, ...kept].map((c) => status.get(c.id))).toEqual(['in_progress', 'in_progress', 'completed', 'completed']);
  });

  it('a key too long for the index fails alone; the others of its batch are acquired', async () => {
    const tooLong = fresh({ key: randomBytes(4000).toString('hex') });
    const good = [fresh(), fresh()];
    const [long, ...goodOutcomes] = await Promise.allSettled([store.claim(tooLong), ...good.map((r) => store.claim(r))]);
    expect(long.status === 'rejected' && (long.reason as { code?: string }).code).toBe('54000');
    for (const o of goodOutcomes) expect(o).toMatchObject({ status: 'fulfilled', value: { kind: 'acquired' } });
  });

  it('a result that cannot be rendered as JSON fails its own completion only', async () => {
    const [unrenderable, ...kept] = (await Promise.all([fresh(), fresh(), fresh()].map((r) => store.claim(r)))).map(claimOf);
    const settled = await Promise.allSettled([store.complete(unrenderable, { amount: 1n }), ...kept.map((c) => store.complete(c, 'kept'))]);
    expect(settled[0].status === 'rejected' && settled[0].reason).toBeInstanceOf(TypeError);
    for (const s of settled.slice(1)) expect(s).toMatchObject({ status: 'fulfilled', value: { result: 'kept' } });
  });

  it('a large result is completed in a statement of its own, beside the shared one', async () => {
    const claims = (await Promise.all([fresh(), fresh(), fresh()].map((r) => store.claim(r)))).map(claimOf);
    const large = { body: 'x'.repeat(100_000) };
    const before = counter.count;
    const records = await Promise.all([store.complete(claims[0], large), store.complete(claims[1], 'a'), store.complete(claims[2], 'b')]);
    expect(counter.count - before).toBe(2);
    expect(records.map((r) => r?.result)).toEqual([large, 'a', 'b']);
    const [{ n }] = await sql<{ n: number }>(`SELECT length(result->>'body')::int AS n FROM ${table} WHERE id = $1`, [claims[0].id]);
    expect(n).toBe(100_000);
  });

  it("a batch's lock bound ends with its statement: the pooled connection keeps its own lock_timeout", async () => {
    const single = await createTestApp({
      adapter: 'express', schema, controllers: [], options: { postgres: { url: databaseUrl(), schema, poolSize: 1 }, redis: false },
    });
    try {
      const pool = single.get(IdempotencyConnections).pool;
      const [{ lock_timeout: before }] = (await pool.query<{ lock_timeout: string }>('SHOW lock_timeout')).rows;
      const singleStore = single.get(IdempotencyStore);
      const claims = (await Promise.all([fresh(), fresh(), fresh()].map((r) => singleStore.claim(r)))).map(claimOf);
      await Promise.all(claims.map((c) => singleStore.complete(c, 'done')));
      expect((await pool.query<{ lock_timeout: string }>('SHOW lock_timeout')).rows[0].lock_timeout).toBe(before);
      expect(before).not.toBe(`${BATCH_LOCK_TIMEOUT_MS}ms`);
    } finally {
      await single.close();
    }
  });

  it('reads of one turn are one statement, and each gets what it would get alone', async () => {
    const done = fresh();
    await store.complete(claimOf(await store.claim(done)), { v: 'done' });
    const held = fresh();
    claimOf(await store.claim(held));
    const unknown = fresh();
    const bad = fresh({ key: `nul\u0000key` });

    const before = counter.count;
    const [completed, inProgress, none, again] = await Promise.all([done, held, unknown, done].map((r) => store.find(r.scope, r.key)));
    expect(counter.count - before).toBe(1);
    expect(completed).toMatchObject({ kind: 'completed', record: { fingerprint: 'fp-a', result: { v: 'done' } } });
    expect(again).toEqual(completed);
    expect(inProgress).toMatchObject({ kind: 'in_progress', fingerprint: 'fp-a' });
    expect(inProgress?.kind === 'in_progress' && inProgress.lockedUntil).toBeGreaterThan(Date.now());
    expect(none).toBeNull();

    const settled = await Promise.allSettled([store.find(bad.scope, bad.key), store.find(done.scope, done.key)]);
    expect(settled[0].status).toBe('rejected');
    expect(settled[1]).toMatchObject({ status: 'fulfilled', value: { kind: 'completed' } });
  });

  // Key order keeps overlapping batches free of lock cycles. Were it lost, the bounded lock wait and the calls made
  // again alone would still give these outcomes, more slowly: this case checks the outcomes, not the order.
  it('two instances claiming the same keys in opposite orders: each key acquired once, no failure', async () => {
    const otherStore = other.get(IdempotencyStore);
    for (let round = 0; round < 10; round++) {
      const requests = Array.from({ length: 40 }, () => fresh());
      const settled = await Promise.allSettled([
        ...requests.map((r) => store.claim(r)),
        ...[...requests].reverse().map((r) => otherStore.claim(r)),
      ]);
      const outcomes = settled.map((s) => {
        if (s.status === 'rejected') throw s.reason;
        return s.value;
      });
      expect(outcomes.filter((o) => o.kind === 'acquired')).toHaveLength(requests.length);
      expect(outcomes.filter((o) => o.kind === 'in_progress')).toHaveLength(requests.length);
    }
  });
});
