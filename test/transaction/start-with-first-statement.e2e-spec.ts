// A transaction whose START TRANSACTION goes to Postgres with its first statement (the fresh transactional step's):
// the statement runs inside it, answers what it would have answered alone, and the START costs no round trip.
import { INestApplication } from '@nestjs/common';
import type { PoolClient } from 'pg';
import { IdempotencyConnections } from '../../lib/storage/idempotency-connections';
import { IdempotencyTransactions, OpenTransaction } from '../../lib/transaction/idempotency-transactions';
import { createTestApp, sql, uniqueSchema } from '../support/test-app';

/** Counts the round trips of a connection: each ends with one ReadyForQuery. */
function roundTrips(tx: OpenTransaction): { count: () => number; client: PoolClient } {
  const client = (tx.manager.queryRunner as unknown as { databaseConnection: PoolClient }).databaseConnection;
  let n = 0;
  (client as unknown as { connection: NodeJS.EventEmitter }).connection.on('readyForQuery', () => n++);
  return { count: () => n, client };
}

describe('a transaction started by its first statement', () => {
  const schema = uniqueSchema('txstart');
  let app: INestApplication;
  let transactions: IdempotencyTransactions;
  let table: string;

  beforeAll(async () => {
    table = `"${schema}".notes`;
    await sql(`CREATE SCHEMA "${schema}"; CREATE TABLE ${table} (id serial PRIMARY KEY, note text NOT NULL)`);
    app = await createTestApp({ adapter: 'express', controllers: [], schema });
    transactions = app.get(IdempotencyTransactions);
  });

  afterAll(async () => {
    await app?.close();
  });

  const visible = async (note: string): Promise<number> => Number((await sql<{ n: string }>(`SELECT count(*) AS n FROM ${table} WHERE note = $1`, [note]))[0].n);

  it('runs a statement with parameters inside the transaction, in one round trip with the START, at the asked isolation', async () => {
    const tx = await transactions.beginOnFirstStatement('serializable', 1000);
    const trips = roundTrips(tx);
    const inserted = await tx.manager.query(`INSERT INTO ${table} (note) VALUES ($1) RETURNING note, txid_current()::text AS txid, current_setting('transaction_isolation') AS isolation`, ['with-params']);
    expect(trips.count()).toBe(1);
    // exactly the INSERT's rows, as TypeORM reads them when alone
    expect(inserted).toEqual([{ note: 'with-params', txid: expect.any(String), isolation: 'serializable' }]);
    const again = await tx.manager.query('SELECT txid_current()::text AS txid');
    expect(again).toEqual([{ txid: (inserted as Array<{ txid: string }>)[0].txid }]);
    expect(await visible('with-params')).toBe(0);
    await tx.commit();
    expect(await visible('with-params')).toBe(1);
  });

  it('runs a statement without parameters (simple protocol) inside it, with only that statement\'s results', async () => {
    const tx = await transactions.beginOnFirstStatement('repeatable read', 1000);
    const trips = roundTrips(tx);
    const result = await trips.client.query(`INSERT INTO ${table} (note) VALUES ('no-params'); SELECT current_setting('transaction_isolation') AS isolation`);
    expect(trips.count()).toBe(1);
    // two statements answer two results, as without the START
    const results = result as unknown as Array<{ command: string; rows: unknown[] }>;
    expect(results.map((r) => r.command)).toEqual(['INSERT', 'SELECT']);
    expect(results[1].rows).toEqual([{ isolation: 'repeatable read' }]);
    expect(await visible('no-params')).toBe(0);
    await tx.rollback();
    expect(await visible('no-params')).toBe(0);
  });

  it('sends the START with the checkpoint when the work wrote nothing: one round trip to commit', async () => {
    const tx = await transactions.beginOnFirstStatement('read committed', 1000);
    const trips = roundTrips(tx);
    const rows = await tx.commitAfter([{ statement: { text: `INSERT INTO ${table} (note) VALUES ($1) RETURNING note` }, values: ['at-commit'] }]);
    expect(trips.count()).toBe(1);
    expect(rows).toEqual([[{ note: 'at-commit' }]]);
    expect(await visible('at-commit')).toBe(1);
  });

  it('ends without a statement when nothing was sent, and leaves the connection as it found it', async () => {
    const connections = app.get(IdempotencyConnections);
    for (const end of ['rollback', 'commit'] as const) {
      const tx = await transactions.beginOnFirstStatement('read committed', 1000);
      const trips = roundTrips(tx);
      await tx[end]();
      expect(trips.count()).toBe(0);
      expect(Object.prototype.hasOwnProperty.call(trips.client, 'query')).toBe(false);
      expect(tx.manager.queryRunner?.isReleased).toBe(true);
    }
    // every pooled connection autocommits again: a write is visible at once from another connection
    const pool = connections.pool;
    const clients = await Promise.all(Array.from({ length: Math.min(pool.totalCount, 3) || 1 }, () => pool.connect()));
    try {
      for (const [i, client] of clients.entries()) {
        await client.query(`INSERT INTO ${table} (note) VALUES ($1)`, [`after-${i}`]);
        expect(await visible(`after-${i}`)).toBe(1);
      }
    } finally {
      for (const client of clients) client.release();
    }
  });

  it('rolls back after a failing first statement; the connection is usable again', async () => {
    const tx = await transactions.beginOnFirstStatement('read committed', 1000);
    await expect(tx.manager.query(`INSERT INTO ${table} (note) VALUES ($1)`, [null])).rejects.toThrow(/null value/);
    // the START went first: the transaction is open and aborted, so a further statement is refused
    await expect(tx.manager.query('SELECT 1')).rejects.toThrow(/current transaction is aborted/);
    await tx.rollback();
    const next = await transactions.beginOnFirstStatement('read committed', 1000);
    await next.manager.query(`INSERT INTO ${table} (note) VALUES ($1)`, ['after-failure']);
    await next.commit();
    expect(await visible('after-failure')).toBe(1);
  });

  it('queues the START ahead of a statement it cannot carry (a query config object)', async () => {
    const tx = await transactions.beginOnFirstStatement('serializable', 1000);
    const trips = roundTrips(tx);
    const reply = await trips.client.query<{ isolation: string }>({ text: "SELECT current_setting('transaction_isolation') AS isolation", values: [] });
    expect(reply.rows).toEqual([{ isolation: 'serializable' }]);
    expect(trips.count()).toBe(2);
    await tx.rollback();
  });
});
