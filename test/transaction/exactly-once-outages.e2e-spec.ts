// Issue 8, behaviour 6: a duplicate while Redis is down, and the Postgres connection lost mid-transaction (as in a
// restart): the same outcomes, or 503 — never a doubled effect.
import { Body, Controller, INestApplication, Post } from '@nestjs/common';
import { createServer } from 'node:net';
import request from 'supertest';
import { currentTransaction, PROBLEM_CONTENT_TYPE } from '../../lib';
import { gate, listen, waitUntil } from '../support/resilience';
import { ADAPTERS, createTestApp, databaseUrl, sql, uniqueSchema } from '../support/test-app';
import { TcpProxy } from '../workflow/tcp-proxy';

jest.setTimeout(60_000);

const hold: { before: () => Promise<void>; next: () => Promise<void>; wrote: number } = { before: () => Promise.resolve(), next: () => Promise.resolve(), wrote: 0 };
const tables = new Map<string, string>();

@Controller()
class ChargeController {
  @Post('charges')
  async charge(@Body() body: { id: string; schema: string }): Promise<{ charged: string }> {
    await hold.before();
    await currentTransaction().query(`INSERT INTO ${tables.get(body.schema)} (charge_id) VALUES ($1)`, [body.id]);
    hold.wrote++;
    await hold.next();
    return { charged: body.id };
  }
}

/** A local port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe.each(ADAPTERS)('transactional mode through outages (%s)', (adapter) => {
  const schema = uniqueSchema('txo');
  let proxy: TcpProxy;
  let pgPort: number;
  let app: INestApplication;
  let url: string;

  const rows = async (id: string): Promise<number> =>
    Number((await sql<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".ledger WHERE charge_id = $1`, [id]))[0].n);
  const charge = (key: string, id: string) => request(url).post('/charges').set('Idempotency-Key', key).send({ id, schema });

  beforeAll(async () => {
    await sql(`CREATE SCHEMA "${schema}"; CREATE TABLE "${schema}".ledger (id serial PRIMARY KEY, charge_id text NOT NULL)`);
    tables.set(schema, `"${schema}".ledger`);
    const target = new URL(databaseUrl());
    pgPort = Number(target.port);
    proxy = new TcpProxy(pgPort);
    target.port = String(await proxy.listen());
    app = await createTestApp({
      adapter, schema, controllers: [ChargeController],
      options: {
        postgres: { url: target.toString(), schema },
        redis: { url: `redis://127.0.0.1:${await closedPort()}`, commandTimeout: '100ms' }, // Redis is down throughout
        http: { transaction: true, lockTimeout: '5s' },
      },
    });
    url = await listen(app);
  });

  afterAll(async () => {
    await app?.close();
    await proxy?.close();
  });

  beforeEach(() => {
    hold.before = () => Promise.resolve();
    hold.next = () => Promise.resolve();
    hold.wrote = 0;
  });

  it('a duplicate while Redis is down meets the uncommitted claim at the unique index (409), then replays the one committed charge', async () => {
    const held = gate();
    hold.next = () => held.promise;
    const first = charge('r1', 'r1').then((r) => r);
    await waitUntil('the handler wrote', () => hold.wrote === 1);
    const duplicate = await charge('r1', 'r1');
    expect(duplicate.status).toBe(409);
    expect(duplicate.headers['content-type']).toContain(PROBLEM_CONTENT_TYPE);
    held.open();
    expect((await first).status).toBe(201);
    const replay = await charge('r1', 'r1');
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(hold.wrote).toBe(1);
    expect(await rows('r1')).toBe(1);
  });

  it('a connection lost mid-transaction answers 503 with nothing written; the retry charges once', async () => {
    const held = gate();
    hold.next = () => held.promise;
    const first = charge('p1', 'p1').then((r) => r);
    await waitUntil('the handler wrote', () => hold.wrote === 1);
    proxy.retarget(pgPort); // cuts every open connection, the transaction's too: Postgres rolls it back
    held.open();
    const failed = await first;
    expect(failed.status).toBe(503);
    expect(failed.headers['content-type']).toContain(PROBLEM_CONTENT_TYPE);
    expect(await rows('p1')).toBe(0);
    hold.next = () => Promise.resolve();
    const retried = await waitUntil('a retry ran', async () => {
      const res = await charge('p1', 'p1');
      return res.status === 201 ? res : undefined;
    }, { intervalMs: 200 });
    expect(retried.headers['idempotent-replayed']).toBeUndefined();
    expect((await charge('p1', 'p1')).headers['idempotent-replayed']).toBe('true');
    expect(await rows('p1')).toBe(1);
  });

  it('a connection lost before the handler\'s own write answers 503 (its query fails, not the handler), and the retry charges once', async () => {
    const held = gate();
    let started = false;
    hold.before = () => {
      started = true;
      return held.promise;
    };
    const first = charge('p2', 'p2').then((r) => r);
    await waitUntil('the handler runs in its transaction', () => started);
    proxy.retarget(pgPort); // the transaction's connection is cut before the handler writes through it
    held.open();
    const failed = await first;
    expect(failed.status).toBe(503);
    expect(failed.headers['content-type']).toContain(PROBLEM_CONTENT_TYPE);
    expect(failed.headers['retry-after']).toBe('1');
    expect(await rows('p2')).toBe(0);
    hold.before = () => Promise.resolve();
    const retried = await waitUntil('a retry ran', async () => {
      const res = await charge('p2', 'p2');
      return res.status === 201 ? res : undefined;
    }, { intervalMs: 200 });
    expect(retried.headers['idempotent-replayed']).toBeUndefined();
    expect(await rows('p2')).toBe(1);
  });
});
