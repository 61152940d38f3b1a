import { createHash } from 'node:crypto';
import { Pool } from 'pg';
import { IdempotencyConnections } from '../../lib/storage/idempotency-connections';
import { databaseUrl, sql } from '../support/test-app';

// The default redis.keyPrefix keeps stores that share one Redis apart. It names the Postgres server by its cluster's
// system identifier, not by the address a connection reached it at: that changed with the path (a Unix socket gave
// none, a pooler or a failover another), so instances of one app connected differently used different caches.
describe('the default Redis key prefix', () => {
  let pool: Pool;
  beforeAll(() => {
    pool = new Pool({ connectionString: databaseUrl(), max: 1 });
  });
  afterAll(() => pool.end());

  it('is derived from the server cluster, the database and the schema, not from the server address', async () => {
    const [{ id, db }] = await sql<{ id: string; db: string }>('SELECT system_identifier::text AS id, current_database() AS db FROM pg_control_system()');
    const expected = `idem:${createHash('sha1').update(`cluster/${id}/${db}/payments`).digest('hex').slice(0, 12)}`;
    expect(await IdempotencyConnections.derivedKeyPrefix(pool, 'payments')).toBe(expected);
    expect(await IdempotencyConnections.derivedKeyPrefix(pool, 'orders')).not.toBe(expected);
  });
});
