import type { Pool } from 'pg';
import { quoteIdent } from '../storage/postgres/idempotency.sql';
import type { CatchUp, ScheduleDefinition } from './schedule.interfaces';

/** A schedule's row: its definition and `lastOccurrenceMs`, the newest occurrence already handled. */
export interface ScheduleRow extends ScheduleDefinition {
  lastOccurrenceMs: number;
}

interface Row {
  name: string;
  kind: string;
  target: string;
  cron: string;
  timezone: string | null;
  catch_up: CatchUp;
  source: 'decorator' | 'runtime';
  last_ms: string;
}

const COLUMNS = `name, kind, target, cron, timezone, catch_up, source, (extract(epoch FROM last_occurrence) * 1000)::bigint AS last_ms`;

function toRow(r: Row): ScheduleRow {
  return {
    name: r.name,
    kind: r.kind,
    target: r.target,
    cron: r.cron,
    ...(r.timezone === null ? {} : { timezone: r.timezone }),
    catchUp: r.catch_up,
    source: r.source,
    lastOccurrenceMs: Number(r.last_ms),
  };
}

/** Schedules in Postgres (`idempotency_schedules`): the durable mark from which missed occurrences are found. */
export class PostgresScheduleStore {
  private readonly table: string;

  constructor(private readonly pool: Pool, schema: string) {
    this.table = `${quoteIdent(schema)}.${quoteIdent('idempotency_schedules')}`;
  }

  /** Creates or updates a schedule; a new one starts with `last_occurrence = now()`, so it catches up on nothing. */
  async save(d: ScheduleDefinition): Promise<ScheduleRow> {
    const { rows } = await this.pool.query<Row>(
      `INSERT INTO ${this.table} (name, kind, target, cron, timezone, catch_up, source, last_occurrence)
       VALUES ($1, $2, $3, $4, $5, $6, $7, now())
       ON CONFLICT (name) DO UPDATE SET kind = EXCLUDED.kind, target = EXCLUDED.target, cron = EXCLUDED.cron,
         timezone = EXCLUDED.timezone, catch_up = EXCLUDED.catch_up, source = EXCLUDED.source, updated_at = now()
       RETURNING ${COLUMNS}`,
      [d.name, d.kind, d.target, d.cron, d.timezone ?? null, d.catchUp, d.source],
    );
    return toRow(rows[0]);
  }

  async get(name: string): Promise<ScheduleRow | undefined> {
    const { rows } = await this.pool.query<Row>(`SELECT ${COLUMNS} FROM ${this.table} WHERE name = $1`, [name]);
    return rows[0] ? toRow(rows[0]) : undefined;
  }

  /** Schedules added at runtime (`WorkflowClient.schedule`), restored at boot. */
  async runtime(): Promise<ScheduleRow[]> {
    const { rows } = await this.pool.query<Row>(`SELECT ${COLUMNS} FROM ${this.table} WHERE source = 'runtime' ORDER BY name`);
    return rows.map(toRow);
  }

  /** Marks occurrences up to `toMs` as handled (never moves the mark back). */
  async advance(name: string, toMs: number): Promise<void> {
    await this.pool.query(
      `UPDATE ${this.table} SET last_occurrence = GREATEST(last_occurrence, to_timestamp($2::float8 / 1000)), updated_at = now() WHERE name = $1`,
      [name, toMs],
    );
  }

  /** Records a catch-up: occurrences found missed through `throughMs`, and how many of them were started. */
  async recordCatchUp(name: string, throughMs: number, missed: number, started: number): Promise<void> {
    await this.pool.query(
      `UPDATE ${this.table} SET caught_up_through = to_timestamp($2::float8 / 1000), caught_up_missed = $3, caught_up_started = $4 WHERE name = $1`,
      [name, throughMs, missed, started],
    );
  }

  /** Deletes a schedule; false when there was none of that name. */
  async remove(name: string): Promise<boolean> {
    const { rowCount } = await this.pool.query(`DELETE FROM ${this.table} WHERE name = $1`, [name]);
    return (rowCount ?? 0) > 0;
  }
}
