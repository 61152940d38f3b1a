import { INestApplication } from '@nestjs/common';
import { BeginResult, Claim, IdempotencyService, IdempotencyStore } from '../../lib';
import { createTestApp, sql, uniqueSchema } from '../support/test-app';

function claimOf(result: BeginResult): Claim {
  if (result.kind !== 'acquired') throw new Error(`expected to acquire the key, got ${result.kind}`);
  return result.claim;
}

describe('the status-filtered partial unique index (Postgres is the source of truth)', () => {
  const schema = uniqueSchema('pidx');
  const table = `"${schema}".idempotency_records`;
  let app: INestApplication;
  let service: IdempotencyService;
  let store: IdempotencyStore;

  beforeAll(async () => {
    // Postgres alone: every answer below is the store's.
    app = await createTestApp({ adapter: 'express', schema, controllers: [], options: { redis: false } });
    service = app.get(IdempotencyService);
    store = app.get(IdempotencyStore);
  });

  afterAll(() => app?.close());

  const req = (key: string, fingerprint = 'fp') => ({ scope: 'idx', key, fingerprint, leaseMs: 30_000, ttlMs: 60_000 });

  it('exists as a unique index on (scope, key) with the predicate status NOT IN (failed, cancelled, timed_out)', async () => {
    const rows = await sql<{ name: string; unique: boolean; columns: string[]; predicate: string }>(
      `SELECT c.relname AS name, i.indisunique AS unique,
              array(SELECT a.attname::text FROM unnest(i.indkey) WITH ORDINALITY k(attnum, n)
                      JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum ORDER BY k.n) AS columns,
              pg_get_expr(i.indpred, i.indrelid) AS predicate
         FROM pg_index i
         JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = to_regclass($1) AND i.indisunique AND NOT i.indisprimary`,
      [table],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ unique: true, columns: ['scope', 'key'] });

    // Compare with how Postgres normalizes the documented predicate, on a scratch table.
    const scratch = `"${schema}".predicate_reference`;
    await sql(`CREATE TABLE ${scratch} (scope text, key text, status text)`);
    await sql(`CREATE UNIQUE INDEX predicate_reference_idx ON ${scratch} (scope, key) WHERE status NOT IN ('failed','cancelled','timed_out')`);
    const [reference] = await sql<{ predicate: string }>(
      `SELECT pg_get_expr(i.indpred, i.indrelid) AS predicate FROM pg_index i WHERE i.indrelid = to_regclass($1)`, [scratch],
    );
    await sql(`DROP TABLE ${scratch}`);
    expect(rows[0].predicate).toBe(reference.predicate);
    expect(rows[0].predicate).toMatch(/status <> ALL \(ARRAY\['failed'::text, 'cancelled'::text, 'timed_out'::text\]\)/);
  });

  it('a failed record does not block a new claim; the new claim gets a new row', async () => {
    const first = claimOf(await service.begin(req('after-failure')));
    await service.release(first, { message: 'boom' });
    const second = claimOf(await service.begin(req('after-failure')));
    expect(second.id).not.toBe(first.id);
    const rows = await sql<{ status: string }>(`SELECT status FROM ${table} WHERE scope = 'idx' AND key = 'after-failure' ORDER BY id`);
    expect(rows.map((r) => r.status)).toEqual(['failed', 'in_progress']);
    // Several failed rows for one key can coexist under the index.
    await service.release(second);
    claimOf(await service.begin(req('after-failure')));
    const again = await sql<{ status: string }>(`SELECT status FROM ${table} WHERE scope = 'idx' AND key = 'after-failure' ORDER BY id`);
    expect(again.map((r) => r.status)).toEqual(['failed', 'failed', 'in_progress']);
  });

  it.each(['cancelled', 'timed_out'])('a %s record does not block a new claim either', async (status) => {
    const key = `after-${status}`;
    const first = claimOf(await service.begin(req(key)));
    await sql(`UPDATE ${table} SET status = $2, locked_until = NULL WHERE id = $1`, [first.id, status]);
    const second = await service.begin(req(key));
    expect(second.kind).toBe('acquired');
  });

  it('a completed record blocks a new claim: the outcome is replayed, nothing new is written', async () => {
    const first = claimOf(await service.begin(req('after-completion')));
    expect(await service.complete(first, { ok: 1 })).toBe(true);
    expect(await service.begin(req('after-completion'))).toMatchObject({ kind: 'replay', record: { result: { ok: 1 } } });
    expect(await service.begin(req('after-completion', 'other'))).toEqual({ kind: 'mismatch' });
    expect(await store.claim(req('after-completion'))).toMatchObject({ kind: 'completed' });
    const rows = await sql(`SELECT status FROM ${table} WHERE scope = 'idx' AND key = 'after-completion'`);
    expect(rows).toEqual([{ status: 'completed' }]);
  });

  it('an in-progress record blocks a new claim while its lease is live', async () => {
    claimOf(await service.begin(req('in-flight')));
    expect((await service.begin(req('in-flight'))).kind).toBe('in_progress');
    const rows = await sql(`SELECT status FROM ${table} WHERE scope = 'idx' AND key = 'in-flight'`);
    expect(rows).toEqual([{ status: 'in_progress' }]);
  });

  it('the index itself refuses a second active row, and accepts a second failed one', async () => {
    const insert = (key: string, status: string) =>
      sql(`INSERT INTO ${table} (scope, key, fingerprint, status, expires_at) VALUES ('raw', $1, 'fp', $2, now() + interval '1 hour')`, [key, status]);
    await insert('raw-completed', 'completed');
    await expect(insert('raw-completed', 'completed')).rejects.toMatchObject({ code: '23505' });
    await expect(insert('raw-completed', 'in_progress')).rejects.toMatchObject({ code: '23505' });
    await expect(insert('raw-completed', 'failed')).resolves.toEqual([]);
    await expect(insert('raw-completed', 'failed')).resolves.toEqual([]);
    await expect(insert('raw-completed', 'cancelled')).resolves.toEqual([]);
  });

  it('the same key in two scopes is two records', async () => {
    const a = claimOf(await service.begin({ ...req('scoped'), scope: 'tenant-a' }));
    const b = claimOf(await service.begin({ ...req('scoped'), scope: 'tenant-b' }));
    expect(a.id).not.toBe(b.id);
  });

  it('an expired record that cleanup has not removed counts as absent', async () => {
    const first = claimOf(await service.begin(req('expired')));
    await service.complete(first, { ok: 'old' });
    await sql(`UPDATE ${table} SET expires_at = now() - interval '1 second' WHERE id = $1`, [first.id]);
    expect(await store.find('idx', 'expired')).toBeNull();
    const again = await service.begin(req('expired', 'new-fingerprint'));
    expect(again.kind).toBe('acquired');
  });
});
