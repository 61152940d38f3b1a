import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { quoteIdent } from './idempotency.sql';

/** The table of named leases (migration CreateIdempotencyLocks1764000500000). */
export const LOCKS_TABLE = 'idempotency_locks';

/** How long a lease lasts without renewal: a holder that died frees it after this. */
const LEASE_MS = 60_000;

/**
 * "One instance at a time" for background passes (retention, the workflow reconciler), as a lease row rather than
 * a session advisory lock: taking, renewing and returning it are single autocommit statements, so it needs no
 * connection of its own for the whole pass (a pool of one never waits on itself) and it means the same thing
 * behind PgBouncer in transaction pooling, where a session lock lands on whichever server connection ran the
 * statement and may be kept or taken again by another client. A holder that dies frees it after the lease.
 */
export class LeaseLock {
  private readonly sql: { acquire: string; renew: string; release: string };

  constructor(
    private readonly connection: { readonly pool: Pool; readonly schema: string },
    private readonly name: string,
    private readonly leaseMs = LEASE_MS,
  ) {
    const table = `${quoteIdent(connection.schema)}.${quoteIdent(LOCKS_TABLE)}`;
    const until = `now() + ($3::bigint * interval '1 millisecond')`;
    this.sql = {
      // A live lease of another holder makes the update's WHERE false: no row comes back, the lock is not taken.
      acquire: `
        INSERT INTO ${table} AS l (name, holder, locked_until) VALUES ($1, $2, ${until})
        ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, locked_until = EXCLUDED.locked_until
         WHERE l.locked_until <= now()
        RETURNING holder`,
      renew: `UPDATE ${table} SET locked_until = ${until} WHERE name = $1 AND holder = $2`,
      release: `DELETE FROM ${table} WHERE name = $1 AND holder = $2`,
    };
  }

  /** Runs `work` while holding the lease and returns `{ acquired: true, value }`, or `{ acquired: false }` when another holder has it. */
  async run<T>(work: () => Promise<T>): Promise<{ acquired: true; value: T } | { acquired: false }> {
    const holder = randomUUID();
    const pool = this.connection.pool;
    const { rows } = await pool.query(this.sql.acquire, [this.name, holder, this.leaseMs]);
    if (rows.length === 0) return { acquired: false };
    let renewing: Promise<unknown> = Promise.resolve();
    const timer = setInterval(() => {
      // A renewal that fails (Postgres briefly away) is retried on the next tick; the lease outlives two misses.
      renewing = pool.query(this.sql.renew, [this.name, holder, this.leaseMs]).catch(() => undefined);
    }, Math.max(1, Math.floor(this.leaseMs / 3)));
    timer.unref();
    try {
      return { acquired: true, value: await work() };
    } finally {
      clearInterval(timer);
      await renewing;
      await pool.query(this.sql.release, [this.name, holder]).catch(() => undefined); // else it lapses after the lease
    }
  }
}
