import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { Pool } from 'pg';
import type { EntityManager } from 'typeorm';
import { PG_POOL } from '../database/database.module';

/**
 * `payment_notifications`: one row per notification sent for a payment (what customers would receive), and
 * `payment_notification_runs`: every run of the consumer, counted on its own connection, so the demo can show that a
 * message processed twice (a redelivery after a crash) still notified once.
 */
@Injectable()
export class PaymentNotificationsRepository implements OnModuleInit {
  constructor(@Inject(PG_POOL) private readonly pool: Pool) {}

  async onModuleInit(): Promise<void> {
    await this.pool.query(`
      CREATE TABLE IF NOT EXISTS payment_notifications (
        id bigserial PRIMARY KEY, message_id text NOT NULL, payment_id uuid NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`);
    await this.pool.query(`
      CREATE TABLE IF NOT EXISTS payment_notification_runs (
        id bigserial PRIMARY KEY, message_id text NOT NULL, payment_id uuid NOT NULL, pid int NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`);
  }

  /** Counts a run of the consumer (committed at once, whatever happens to the run). */
  async countRun(messageId: string, paymentId: string): Promise<void> {
    await this.pool.query('INSERT INTO payment_notification_runs (message_id, payment_id, pid) VALUES ($1, $2, $3)', [messageId, paymentId, process.pid]);
  }

  /** Records a notification inside the inbox's transaction, so it and the inbox entry commit together. */
  async insert(manager: EntityManager, messageId: string, paymentId: string): Promise<void> {
    await manager.query('INSERT INTO public.payment_notifications (message_id, payment_id) VALUES ($1, $2)', [messageId, paymentId]);
  }

  /** Notifications sent and consumer runs, for one payment. */
  async countFor(paymentId: string): Promise<{ notifications: number; runs: number }> {
    const { rows } = await this.pool.query<{ notifications: number; runs: number }>(
      `SELECT (SELECT count(*)::int FROM payment_notifications WHERE payment_id = $1) AS notifications,
              (SELECT count(*)::int FROM payment_notification_runs WHERE payment_id = $1) AS runs`,
      [paymentId],
    );
    return rows[0];
  }
}
