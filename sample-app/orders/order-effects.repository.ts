import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { Pool } from 'pg';
import { setTimeout as sleep } from 'node:timers/promises';
import { currentStep } from '../../lib';
import { PG_POOL } from '../database/database.module';

/** Slows each step down (ms) so the demo can kill the worker in the middle of one. */
const STEP_DELAY_MS = Number(process.env.ORDER_STEP_DELAY_MS ?? 0);

/** One side effect of an order step, as recorded. */
export interface OrderEffect {
  step: string;
  idempotencyKey: string;
  detail: unknown;
  createdAt: string;
}

/**
 * The side effects of the order workflow: one table per step (charges, stock reservations, confirmations),
 * each keyed by the step's idempotency key so a step that runs again after a crash writes nothing twice.
 * `order_step_runs` counts every run of a step body (the demo shows completed steps ran once).
 */
@Injectable()
export class OrderEffectsRepository implements OnModuleInit {
  constructor(@Inject(PG_POOL) private readonly pool: Pool) {}

  async onModuleInit(): Promise<void> {
    for (const table of ['order_charges', 'order_reservations', 'order_confirmations']) {
      await this.pool.query(`
        CREATE TABLE IF NOT EXISTS ${table} (
          idempotency_key text PRIMARY KEY,
          order_id text NOT NULL,
          detail jsonb NOT NULL,
          created_at timestamptz NOT NULL DEFAULT now()
        )`);
    }
    await this.pool.query(`
      CREATE TABLE IF NOT EXISTS order_step_runs (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, order_id text NOT NULL, step text NOT NULL, pid int NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now())`);
  }

  /** Records that a step body started running. */
  async countRun(orderId: string, step: string): Promise<void> {
    await this.pool.query('INSERT INTO order_step_runs (order_id, step, pid) VALUES ($1, $2, $3)', [orderId, step, process.pid]);
  }

  /** Writes an effect once per idempotency key; returns the stored detail (the first writer's). */
  async write(table: 'order_charges' | 'order_reservations' | 'order_confirmations', key: string, orderId: string, detail: unknown): Promise<unknown> {
    await this.pool.query(`INSERT INTO ${table} (idempotency_key, order_id, detail) VALUES ($1, $2, $3) ON CONFLICT (idempotency_key) DO NOTHING`, [
      key, orderId, JSON.stringify(detail),
    ]);
    const { rows } = await this.pool.query<{ detail: unknown }>(`SELECT detail FROM ${table} WHERE idempotency_key = $1`, [key]);
    return rows[0].detail;
  }

  /**
   * The body of an order step: counts the run, then writes the effect keyed by the step's idempotency key (what a real
   * payment or e-mail API would receive), so a step that runs again after a crash writes nothing twice.
   */
  async runStep(step: string, table: 'order_charges' | 'order_reservations' | 'order_confirmations', orderId: string, detail: Record<string, unknown>): Promise<string> {
    const { idempotencyKey } = currentStep();
    await this.countRun(orderId, step);
    if (STEP_DELAY_MS > 0) await sleep(STEP_DELAY_MS);
    await this.write(table, idempotencyKey, orderId, detail);
    return `${step}:${idempotencyKey}`;
  }

  /** How many times each step body ran for an order. */
  async runs(orderId: string): Promise<Record<string, number>> {
    const { rows } = await this.pool.query<{ step: string; n: number }>(
      'SELECT step, count(*)::int AS n FROM order_step_runs WHERE order_id = $1 GROUP BY step',
      [orderId],
    );
    return Object.fromEntries(rows.map((r) => [r.step, r.n]));
  }
}
