import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { Pool } from 'pg';
import { PG_POOL } from '../database/database.module';

/** The totals of one reconciled period. */
export interface ReconciliationSummary {
  from: string;
  to: string;
  charges: number;
  total: number;
}

/** The `reconciliations` table: one row per period, written once (a re-run of the same period changes nothing). */
@Injectable()
export class ReconciliationRepository implements OnModuleInit {
  constructor(@Inject(PG_POOL) private readonly pool: Pool) {}

  async onModuleInit(): Promise<void> {
    await this.pool.query(`
      CREATE TABLE IF NOT EXISTS reconciliations (
        period_end timestamptz PRIMARY KEY, period_start timestamptz NOT NULL,
        charges integer NOT NULL, total bigint NOT NULL, created_at timestamptz NOT NULL DEFAULT now()
      )`);
  }

  /** Totals the ledger over [from, to) and records it; a period already recorded returns its stored totals. */
  async summarize(from: string, to: string): Promise<ReconciliationSummary> {
    const { rows } = await this.pool.query<{ charges: number; total: string }>(
      `WITH totals AS (SELECT count(*)::int AS charges, coalesce(sum(amount), 0) AS total FROM ledger WHERE created_at >= $1 AND created_at < $2),
            inserted AS (INSERT INTO reconciliations (period_end, period_start, charges, total) SELECT $2, $1, charges, total FROM totals
                         ON CONFLICT (period_end) DO NOTHING RETURNING charges, total)
       SELECT charges, total FROM inserted UNION ALL SELECT charges, total FROM reconciliations WHERE period_end = $2 LIMIT 1`,
      [from, to],
    );
    return { from, to, charges: rows[0].charges, total: Number(rows[0].total) };
  }
}
