import { Body, Controller, INestApplication, Post, UnprocessableEntityException } from '@nestjs/common';
import { Client } from 'pg';
import request from 'supertest';
import { currentTransaction, Idempotent, NotInTransactionError, PROBLEM_CONTENT_TYPE } from '../../lib';
import { IdempotencyConnections } from '../../lib/storage/idempotency-connections';
import { gate, listen, waitUntil } from '../support/resilience';
import { ADAPTERS, createTestApp, databaseUrl, databaseUrlNamed, sql, uniqueSchema } from '../support/test-app';

interface ChargeBody {
  id: string;
  fail?: 'crash' | 'decline' | 'taken-over';
}

/** What the charge handler waits for after its write, per charge id (all calls pass at once unless a test holds them). */
const hold: { next: (id: string) => Promise<void> } = { next: () => Promise.resolve() };
let ledgerTable = '';

@Controller()
class ChargeController {
  /** Transactional through the module's `http.transaction: true`. */
  @Post('charges')
  async charge(@Body() body: ChargeBody): Promise<{ charged: string }> {
    await currentTransaction().query(`INSERT INTO ${ledgerTable} (charge_id) VALUES ($1)`, [body.id]);
    await hold.next(body.id);
    // Stands for a holder whose claim another request took over: the claim's token no longer holds the record.
    if (body.fail === 'taken-over') await currentTransaction().query(`UPDATE ${ledgerTable.replace('ledger', 'idempotency_records')} SET lease_token = gen_random_uuid() WHERE status = 'in_progress'`);
    if (body.fail === 'decline') throw new UnprocessableEntityException('card declined');
    if (body.fail === 'crash') throw new Error('gateway exploded');
    return { charged: body.id };
  }

  /** The same charge; a duplicate waits for the first (the uncommitted claim) up to 20 s. */
  @Post('charges-wait')
  @Idempotent({ wait: '20s' })
  chargeWaiting(@Body() body: ChargeBody): Promise<{ charged: string }> {
    return this.charge(body);
  }

  /**
   * The same charge under a long lease: a claim that waits on a lock may wait up to it (30 s), so the cases that
   * let such a wait end in time do not race the suite's 1 s lease on a loaded machine.
   */
  @Post('charges-patient')
  @Idempotent({ lockTimeout: '30s' })
  chargePatient(@Body() body: ChargeBody): Promise<{ charged: string }> {
    return this.charge(body);
  }

  @Post('plain')
  @Idempotent({ transaction: false })
  plain(): string {
    try {
      currentTransaction();
      return 'in a transaction';
    } catch (err) {
      return err instanceof NotInTransactionError ? 'not in a transaction' : 'unexpected error';
    }
  }
}

describe.each(ADAPTERS)('HTTP transactional mode (%s)', (adapter) => {
  const schema = uniqueSchema('txh');
  let app: INestApplication;
  let url: string;

  const rows = async (id: string): Promise<number> =>
    Number((await sql<{ n: string }>(`SELECT count(*) AS n FROM ${ledgerTable} WHERE charge_id = $1`, [id]))[0].n);
  const post = (path: string, key: string, body: object) => request(url).post(path).set('Idempotency-Key', key).send(body);
  const records = async (key: string): Promise<number> =>
    Number((await sql<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".idempotency_records WHERE key = $1`, [key]))[0].n);
  /**
   * This app's requests blocked in Postgres on another transaction's lock (a duplicate waiting for an uncommitted
   * claim). Its connections carry the schema as their application_name: CI runs this suite through PgBouncer at the
   * same time on the same database, and the other run's waiters are not this one's.
   */
  const blockedClaims = async (): Promise<number> => Number((await sql<{ n: string }>(
    `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND application_name = $1`, [schema],
  ))[0].n);
  /**
   * Waits until exactly one request is blocked in Postgres on a lock. Should it time out, the error lists the
   * backends waiting on a lock and, when `request` has answered already, its answer: the compat suite (PgBouncer)
   * once timed out here and the log could not tell a second waiter from a claim that never waited.
   */
  const oneBlockedClaim = async (what: string, request: Promise<{ status: number; body: unknown }>): Promise<void> => {
    let answered: { status: number; body: unknown } | undefined;
    void request.then((r) => (answered = r), () => undefined);
    try {
      await waitUntil(what, async () => (await blockedClaims()) === 1);
    } catch (err) {
      const waiters = await sql(
        `SELECT pid, application_name, wait_event, state, left(query, 160) AS query FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      const answer = answered ? `answered ${answered.status} ${JSON.stringify(answered.body)}` : 'not answered yet';
      throw new Error(`${(err as Error).message}; the request: ${answer}; waiting on a lock: ${JSON.stringify(waiters)}`);
    }
  };

  beforeAll(async () => {
    ledgerTable = `"${schema}".ledger`;
    await sql(`CREATE SCHEMA "${schema}"; CREATE TABLE ${ledgerTable} (id serial PRIMARY KEY, charge_id text NOT NULL)`);
    app = await createTestApp({
      adapter, schema, controllers: [ChargeController],
      options: { postgres: { url: databaseUrlNamed(schema), schema }, http: { transaction: true, lockTimeout: '1s' } },
    });
    url = await listen(app);
  });

  afterAll(async () => {
    await app?.close();
  });

  beforeEach(() => {
    ledgerTable = `"${schema}".ledger`;
    hold.next = () => Promise.resolve();
    jest.restoreAllMocks();
  });

  it('commits the handler write with the stored response: invisible until then, replayed after, one row', async () => {
    const held = gate();
    let wrote = false;
    hold.next = () => ((wrote = true), held.promise);
    const first = post('/charges', 'k1', { id: 'c1' }).then((r) => r);
    await waitUntil('the handler wrote', () => wrote);
    // One commit: neither the write nor even the claim is visible before it.
    expect(await rows('c1')).toBe(0);
    expect(await records('k1')).toBe(0);
    held.open();
    const res = await first;
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ charged: 'c1' });
    expect(await rows('c1')).toBe(1);
    const again = await post('/charges', 'k1', { id: 'c1' });
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.text).toBe(res.text);
    expect(await rows('c1')).toBe(1);
  });

  it('rolls back the writes of a 5xx and releases the key: a retry runs again and leaves no row either', async () => {
    expect((await post('/charges', 'k2', { id: 'c2', fail: 'crash' })).status).toBe(500);
    expect(await rows('c2')).toBe(0);
    expect((await post('/charges', 'k2', { id: 'c2', fail: 'crash' })).status).toBe(500);
    expect(await rows('c2')).toBe(0);
  });

  it('stores a final 4xx after rolling back its writes: replayed, with no row', async () => {
    const res = await post('/charges', 'k3', { id: 'c3', fail: 'decline' });
    expect(res.status).toBe(422);
    expect(await rows('c3')).toBe(0);
    const again = await post('/charges', 'k3', { id: 'c3', fail: 'decline' });
    expect(again.status).toBe(422);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(await rows('c3')).toBe(0);
  });

  it('answers 409 when the completion finds its claim taken over: nothing of the transaction commits, a retry runs once', async () => {
    const res = await post('/charges', 'k9', { id: 'c9', fail: 'taken-over' });
    expect(res.status).toBe(409);
    expect(res.headers['content-type']).toContain(PROBLEM_CONTENT_TYPE);
    expect(await rows('c9')).toBe(0);
    expect(await records('k9')).toBe(0);
    const retry = await post('/charges', 'k9', { id: 'c9' });
    expect(retry.status).toBe(201);
    expect(await rows('c9')).toBe(1);
  });

  it('answers 409 to a duplicate of an uncommitted claim, and to another request with its key (422 once committed); one row', async () => {
    const held = gate();
    let calls = 0;
    hold.next = () => (++calls === 1 ? held.promise : Promise.resolve());
    const first = post('/charges', 'k4', { id: 'c4' }).then((r) => r);
    await waitUntil('the first request wrote', () => calls === 1);
    const duplicate = await post('/charges', 'k4', { id: 'c4' });
    expect(duplicate.status).toBe(409);
    expect(duplicate.headers['content-type']).toContain(PROBLEM_CONTENT_TYPE);
    expect(duplicate.headers['retry-after']).toBeDefined();
    // Another request with the key cannot be told apart before the claim commits: in progress as well.
    expect((await post('/charges', 'k4', { id: 'other' })).status).toBe(409);
    held.open();
    expect((await first).status).toBe(201);
    expect((await post('/charges', 'k4', { id: 'other' })).status).toBe(422);
    expect(calls).toBe(1);
    expect(await rows('c4')).toBe(1);
  });

  /**
   * Runs `body` while inserts into the records table wait in a trigger for a lock that `body` holds: a stand-in for
   * any lock a claim can wait for while it runs that is not another claim of its key (a relation extension lock
   * under insert load). `release` lets the inserts through.
   */
  const withInsertsHeld = async (body: (release: () => Promise<void>) => Promise<void>): Promise<void> => {
    const records = `"${schema}".idempotency_records`;
    // The lock is this suite's schema's: advisory locks are per database, which another run of the suite may share.
    const lock = `hashtext('${schema}')`;
    await sql(`CREATE FUNCTION "${schema}".inserts_wait() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_advisory_xact_lock(${lock}); RETURN NEW; END $$;
      CREATE TRIGGER inserts_wait BEFORE INSERT ON ${records} FOR EACH ROW EXECUTE FUNCTION "${schema}".inserts_wait()`);
    const locker = new Client({ connectionString: databaseUrl() });
    await locker.connect();
    try {
      // Held by an open transaction, so that a pooler in transaction mode keeps it on one server connection.
      await locker.query(`BEGIN; SELECT pg_advisory_xact_lock(${lock})`);
      let released = false;
      const release = async (): Promise<void> => {
        if (!released) await locker.query('COMMIT');
        released = true;
      };
      await body(release);
      await release();
    } finally {
      await locker.end();
      await sql(`DROP TRIGGER inserts_wait ON ${records}; DROP FUNCTION "${schema}".inserts_wait()`);
    }
  };

  it('runs a first-time key whose claim waits on a lock that is not another claim of it: no 409, one row', async () => {
    // Before, the first claim of a key waited 1 ms for any lock, then answered 409 as if a duplicate held the key.
    await withInsertsHeld(async (release) => {
      // The long-lease route: the wait ends when the lock is released, never by the lease (that is the case below).
      const first = post('/charges-patient', 'k-held', { id: 'c-held' }).then((r) => r);
      await oneBlockedClaim('the claim waits on the held lock', first);
      await new Promise((resolve) => setTimeout(resolve, 100));
      await release();
      const res = await first;
      expect(res.status).toBe(201);
      expect(res.body).toEqual({ charged: 'c-held' });
    });
    expect(await rows('c-held')).toBe(1);
  });

  it('answers 503 problem+json when that lock is held longer than a connection may be waited for (the lease): nothing claimed', async () => {
    await withInsertsHeld(async () => {
      const res = await post('/charges', 'k-held-long', { id: 'c-held-long' });
      expect(res.status).toBe(503);
      expect(res.headers['content-type']).toContain(PROBLEM_CONTENT_TYPE);
      expect(res.headers['retry-after']).toBeDefined();
    });
    expect(await rows('c-held-long')).toBe(0);
    expect((await post('/charges', 'k-held-long', { id: 'c-held-long' })).status).toBe(201);
    expect(await rows('c-held-long')).toBe(1);
  });

  it('bounds a wait for a lock on the records table itself (taken before the claim runs) by the lease: 201 once released, 503 past it', async () => {
    // LOCK TABLE stands for autovacuum truncating the table or a migration altering it. Before, a claim waited for it
    // with no bound (the session's lock_timeout: none), holding its pooled connection.
    const locker = new Client({ connectionString: databaseUrl() });
    await locker.connect();
    try {
      await locker.query(`BEGIN; LOCK TABLE "${schema}".idempotency_records IN SHARE MODE`);
      // The wait that ends in time is on the long-lease route; the one past the lease on the 1 s route.
      const brief = post('/charges-patient', 'k-table-brief', { id: 'c-table-brief' }).then((r) => r);
      await oneBlockedClaim('the claim waits on the table lock', brief);
      await locker.query('COMMIT');
      // With its body: a CI run once answered 409 here, and which problem it was is what tells why.
      const released = await brief;
      expect({ status: released.status, body: released.body as unknown }).toMatchObject({ status: 201 });
      await locker.query(`BEGIN; LOCK TABLE "${schema}".idempotency_records IN SHARE MODE`);
      const long = await post('/charges', 'k-table-long', { id: 'c-table-long' });
      expect(long.status).toBe(503);
      expect(long.headers['content-type']).toContain(PROBLEM_CONTENT_TYPE);
      await locker.query('COMMIT');
    } finally {
      await locker.end();
    }
    expect(await rows('c-table-brief')).toBe(1);
    expect(await rows('c-table-long')).toBe(0);
    expect((await post('/charges', 'k-table-long', { id: 'c-table-long' })).status).toBe(201);
  });

  it('bounds that wait by the lease on a new pooled connection too, whose PREPARE of the claim locks the table first', async () => {
    // A new connection (pool growth, a reconnect) prepares the library's statements in a round trip of its own,
    // before the transaction's SET LOCAL. Before, that PREPARE waited for the table lock with no bound.
    const pool = app.get(IdempotencyConnections, { strict: false }).pool as unknown as { _idle: { client: { processID: number } }[] };
    const idle = pool._idle.map((item) => item.client.processID);
    expect(idle.length).toBeGreaterThan(0);
    await sql('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [idle]);
    await waitUntil('the pool dropped its terminated connections', () => pool._idle.length === 0);
    const locker = new Client({ connectionString: databaseUrl() });
    await locker.connect();
    try {
      await locker.query(`BEGIN; LOCK TABLE "${schema}".idempotency_records IN SHARE MODE`);
      const started = Date.now();
      const res = await post('/charges', 'k-prepare-long', { id: 'c-prepare-long' });
      expect(res.status).toBe(503);
      expect(res.headers['content-type']).toContain(PROBLEM_CONTENT_TYPE);
      expect(Date.now() - started).toBeLessThan(10_000); // the lease is 1 s; the old code waited for the COMMIT below
      await locker.query('COMMIT');
    } finally {
      await locker.end();
    }
    expect(await rows('c-prepare-long')).toBe(0);
    expect((await post('/charges', 'k-prepare-long', { id: 'c-prepare-long' })).status).toBe(201);
    expect(await rows('c-prepare-long')).toBe(1);
  });

  it('holds a waiting duplicate on the uncommitted claim, then replays the committed response: one run, one row', async () => {
    const held = gate();
    let calls = 0;
    hold.next = () => (++calls === 1 ? held.promise : Promise.resolve());
    const first = post('/charges-wait', 'k6', { id: 'c6' }).then((r) => r);
    await waitUntil('the first request wrote', () => calls === 1);
    const duplicate = post('/charges-wait', 'k6', { id: 'c6' }).then((r) => r);
    await waitUntil('the duplicate waits for the claim in Postgres', async () => (await blockedClaims()) > 0);
    held.open();
    const [a, b] = await Promise.all([first, duplicate]);
    expect(a.status).toBe(201);
    expect(a.headers['idempotent-replayed']).toBeUndefined();
    expect(b.status).toBe(201);
    expect(b.headers['idempotent-replayed']).toBe('true');
    expect(b.text).toBe(a.text);
    expect(calls).toBe(1);
    expect(await rows('c6')).toBe(1);
  });

  it('lets a waiting duplicate run itself once the claim it waited for rolled back (5xx): one row, its own', async () => {
    const held = gate();
    let calls = 0;
    hold.next = () => (++calls === 1 ? held.promise.then(() => Promise.reject(new Error('gateway exploded'))) : Promise.resolve());
    const first = post('/charges-wait', 'k7', { id: 'c7' }).then((r) => r);
    await waitUntil('the first request wrote', () => calls === 1);
    const duplicate = post('/charges-wait', 'k7', { id: 'c7' }).then((r) => r);
    await waitUntil('the duplicate waits for the claim in Postgres', async () => (await blockedClaims()) > 0);
    held.open();
    expect((await first).status).toBe(500);
    const ran = await duplicate;
    expect(ran.status).toBe(201);
    expect(ran.headers['idempotent-replayed']).toBeUndefined();
    expect(calls).toBe(2);
    expect(await rows('c7')).toBe(1);
  });

  it('lets a route opt out with @Idempotent({ transaction: false })', async () => {
    const res = await post('/plain', 'k5', {});
    expect(res.status).toBe(201);
    expect(res.text).toBe('not in a transaction');
  });
});
