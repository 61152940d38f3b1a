import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { Pool } from 'pg';
import type { EntityManager } from 'typeorm';
import { PG_POOL } from '../database/database.module';
import type { PaymentEvent } from './payment-event';

/** The `payment_events` table: what the payment provider told us, one row per event handled. */
@Injectable()
export class PaymentEventsRepository implements OnModuleInit {
  constructor(@Inject(PG_POOL) private readonly pool: Pool) {}

  async onModuleInit(): Promise<void> {
    await this.pool.query(`
      CREATE TABLE IF NOT EXISTS payment_events (
        id bigserial PRIMARY KEY,
        event_id text NOT NULL,
        type text NOT NULL,
        payment_id text,
        received_at timestamptz NOT NULL DEFAULT now()
      )`);
  }

  /** Records an event inside the inbox's transaction, so the record and the inbox entry commit together. */
  async insert(manager: EntityManager, event: PaymentEvent): Promise<void> {
    await manager.query('INSERT INTO public.payment_events (event_id, type, payment_id) VALUES ($1, $2, $3)', [
      event.id,
      event.type,
      event.data?.paymentId ?? null,
    ]);
  }

  async countFor(eventId: string): Promise<number> {
    const { rows } = await this.pool.query<{ count: string }>('SELECT count(*) AS count FROM payment_events WHERE event_id = $1', [eventId]);
    return Number(rows[0].count);
  }
}
