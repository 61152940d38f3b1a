// Issue 8, behaviour 7: each in-flight transactional request holds one pooled connection (its claim and its writes
// share it). With every connection taken, a request waits at most one lease for one, then gets 503 problem+json:
// nothing ran, nothing was claimed, and the key is free for the retry.
import { Body, Controller, INestApplication, Post } from '@nestjs/common';
import request from 'supertest';
import { currentTransaction, Idempotent, PROBLEM_CONTENT_TYPE } from '../../lib';
import { gate, listen, waitUntil } from '../support/resilience';
import { ADAPTERS, createTestApp, databaseUrl, sql, uniqueSchema } from '../support/test-app';

const hold: { next: () => Promise<void> } = { next: () => Promise.resolve() };
let ledgerTable = '';
let runs = 0;

@Controller()
class ChargeController {
  @Post('charges')
  @Idempotent({ transaction: true, lockTimeout: '500ms' })
  async charge(@Body() body: { id: string }): Promise<{ charged: string }> {
    runs++;
    await currentTransaction().query(`INSERT INTO ${ledgerTable} (charge_id) VALUES ($1)`, [body.id]);
    await hold.next();
    return { charged: body.id };
  }
}

describe.each(ADAPTERS)('transactional mode with every pooled connection in use (%s)', (adapter) => {
  const schema = uniqueSchema('txpool');
  let app: INestApplication;
  let url: string;

  const post = (key: string) => request(url).post('/charges').set('Idempotency-Key', key).send({ id: key });
  const rows = async (): Promise<number> => Number((await sql<{ n: string }>(`SELECT count(*) AS n FROM ${ledgerTable}`))[0].n);

  beforeAll(async () => {
    ledgerTable = `"${schema}".ledger`;
    await sql(`CREATE SCHEMA "${schema}"; CREATE TABLE ${ledgerTable} (id serial PRIMARY KEY, charge_id text NOT NULL)`);
    app = await createTestApp({ adapter, schema, controllers: [ChargeController], options: { postgres: { url: databaseUrl(), schema, poolSize: 2 } } });
    url = await listen(app);
  });

  afterAll(async () => {
    await app?.close();
  });

  it('answers 503 problem+json after a bounded wait while two requests hold the two connections; the retry runs once', async () => {
    ledgerTable = `"${schema}".ledger`;
    runs = 0;
    const held = gate();
    hold.next = () => held.promise;
    const holders = [post('h1').then((r) => r), post('h2').then((r) => r)];
    await waitUntil('both holders run', () => runs === 2);
    const refused = await post('p1');
    expect(refused.status).toBe(503);
    expect(refused.headers['content-type']).toContain(PROBLEM_CONTENT_TYPE);
    expect(refused.headers['retry-after']).toBe('1');
    expect(runs).toBe(2);
    hold.next = () => Promise.resolve();
    held.open();
    expect((await Promise.all(holders)).map((r) => r.status)).toEqual([201, 201]);
    const retried = await post('p1');
    expect(retried.status).toBe(201);
    expect(retried.headers['idempotent-replayed']).toBeUndefined();
    expect(runs).toBe(3);
    expect(await rows()).toBe(3);
  });
});
