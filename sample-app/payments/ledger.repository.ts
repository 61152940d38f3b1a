import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { currentTransaction } from '../../lib';
import { Pool } from 'pg';
import { PG_POOL } from '../database/database.module';
import type { CreatePaymentDto } from './create-payment.dto';
import type { Payment } from './payment';

interface LedgerRow {
  id: string;
  amount: string;
  currency: string;
  created_at: Date;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function toPayment(row: LedgerRow): Payment {
  return { id: row.id, amount: Number(row.amount), currency: row.currency, createdAt: row.created_at.toISOString() };
}

/** The `ledger` table: one row per charge. */
@Injectable()
export class LedgerRepository implements OnModuleInit {
  constructor(@Inject(PG_POOL) private readonly pool: Pool) {}

  async onModuleInit(): Promise<void> {
    await this.pool.query(`
      CREATE TABLE IF NOT EXISTS ledger (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        amount bigint NOT NULL CHECK (amount > 0),
        currency char(3) NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
  }

  /**
   * Writes the charge in the idempotency library's transaction (the route is `transaction: true`): the row commits
   * if and only if the response is stored, so a crash before that leaves no charge and the retry charges once.
   */
  async insert(charge: CreatePaymentDto): Promise<Payment> {
    const rows = await currentTransaction().query<LedgerRow[]>(
      'INSERT INTO ledger (amount, currency) VALUES ($1, $2) RETURNING id, amount, currency, created_at',
      [charge.amount, charge.currency],
    );
    return toPayment(rows[0]);
  }

  async findById(id: string): Promise<Payment | undefined> {
    if (!UUID.test(id)) return undefined;
    const { rows } = await this.pool.query<LedgerRow>('SELECT id, amount, currency, created_at FROM ledger WHERE id = $1', [id]);
    return rows[0] ? toPayment(rows[0]) : undefined;
  }

  async count(): Promise<number> {
    const { rows } = await this.pool.query<{ count: string }>('SELECT count(*) AS count FROM ledger');
    return Number(rows[0].count);
  }
}
