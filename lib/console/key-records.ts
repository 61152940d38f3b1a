import type { Pool } from 'pg';
import { quoteIdent, RECORDS_TABLE } from '../storage/postgres/idempotency.sql';

/** One stored record of a key (a key has one live record and may have released ones before it). */
export interface KeyRecord {
  scope: string;
  key: string;
  status: 'in_progress' | 'completed' | 'failed' | 'cancelled' | 'timed_out';
  /** In progress and its lease not lapsed: a holder is presumed alive. */
  leaseHeld: boolean;
  lockedUntil: Date | null;
  expiresAt: Date;
  createdAt: Date;
  completedAt: Date | null;
  attempts: number;
  /** The stored error of a released record. */
  error: unknown;
}

/** The error stored on a record an operator released. */
export const RELEASED_BY_OPERATOR = { name: 'ReleasedByOperator', message: 'released from the console or the CLI' };

/** Reads and releases key records in Postgres (the console, its injectable API and the CLI share it). */
export class KeyRecords {
  constructor(private readonly connection: { readonly pool: Pool; readonly schema: string }) {}

  private get table(): string {
    return `${quoteIdent(this.connection.schema)}.${quoteIdent(RECORDS_TABLE)}`;
  }

  /** The records of a key in a scope, newest first (at most 20). */
  async show(scope: string, key: string): Promise<KeyRecord[]> {
    const { rows } = await this.connection.pool.query<Record<string, unknown>>(
      `SELECT scope, key, status, locked_until, expires_at, created_at, completed_at, attempts, error,
              (status = 'in_progress' AND locked_until > now()) AS lease_held
         FROM ${this.table} WHERE scope = $1 AND key = $2 ORDER BY id DESC LIMIT 20`,
      [scope, key],
    );
    return rows.map((r) => ({
      scope: r.scope as string,
      key: r.key as string,
      status: r.status as KeyRecord['status'],
      leaseHeld: r.lease_held as boolean,
      lockedUntil: r.locked_until as Date | null,
      expiresAt: r.expires_at as Date,
      createdAt: r.created_at as Date,
      completedAt: r.completed_at as Date | null,
      attempts: r.attempts as number,
      error: r.error,
    }));
  }

  /**
   * Releases a key stuck in progress (its holder is gone and its lease is long): the record is marked failed, so the
   * next request claims the key. A holder still running loses its completion (compare-and-set on its token), as after
   * a lease takeover. False when the key had no record in progress.
   */
  async release(scope: string, key: string): Promise<boolean> {
    const { rowCount } = await this.connection.pool.query(
      `UPDATE ${this.table} SET status = 'failed', locked_until = NULL, completed_at = now(), error = $3::jsonb
        WHERE scope = $1 AND key = $2 AND status = 'in_progress'`,
      [scope, key, JSON.stringify(RELEASED_BY_OPERATOR)],
    );
    return (rowCount ?? 0) > 0;
  }
}
