import { Body, Controller, INestApplication, Post, UnprocessableEntityException } from '@nestjs/common';
import request from 'supertest';
import { currentTransaction, IdempotencyService, Idempotent, NotInTransactionError, PROBLEM_CONTENT_TYPE } from '../../lib';
import { gate, listen, waitUntil } from '../support/resilience';
import { ADAPTERS, createTestApp, sql, uniqueSchema } from '../support/test-app';

interface ChargeBody {
  id: string;
  fail?: 'crash' | 'decline';
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
    if (body.fail === 'decline') throw new UnprocessableEntityException('card declined');
    if (body.fail === 'crash') throw new Error('gateway exploded');
    return { charged: body.id };
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

  beforeAll(async () => {
    ledgerTable = `"${schema}".ledger`;
    await sql(`CREATE SCHEMA "${schema}"; CREATE TABLE ${ledgerTable} (id serial PRIMARY KEY, charge_id text NOT NULL)`);
    app = await createTestApp({ adapter, schema, controllers: [ChargeController], options: { http: { transaction: true, lockTimeout: '1s' } } });
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
    expect(await rows('c1')).toBe(0);
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

  it('answers 409 problem+json to a holder that lost its lease, and rolls its write back: one row, the winner\'s', async () => {
    jest.spyOn(app.get(IdempotencyService), 'keepAlive').mockImplementation(() => () => undefined); // a stalled holder
    const held = gate();
    let calls = 0;
    hold.next = () => (++calls === 1 ? held.promise : Promise.resolve());
    const loser = post('/charges', 'k4', { id: 'c4' }).then((r) => r);
    await waitUntil('the first request wrote', () => calls === 1);
    const winner = await waitUntil('a retry took the key over after the lease lapsed', async () => {
      const res = await post('/charges', 'k4', { id: 'c4' });
      return res.status === 201 ? res : undefined;
    }, { intervalMs: 200 });
    expect(winner.headers['idempotent-replayed']).toBeUndefined();
    held.open();
    const lost = await loser;
    expect(lost.status).toBe(409);
    expect(lost.headers['content-type']).toContain(PROBLEM_CONTENT_TYPE);
    expect(await rows('c4')).toBe(1);
    const replay = await post('/charges', 'k4', { id: 'c4' });
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(await rows('c4')).toBe(1);
  });

  it('lets a route opt out with @Idempotent({ transaction: false })', async () => {
    const res = await post('/plain', 'k5', {});
    expect(res.status).toBe(201);
    expect(res.text).toBe('not in a transaction');
  });
});
