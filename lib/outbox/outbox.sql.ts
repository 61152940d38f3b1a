import { createHash } from 'node:crypto';
import { quoteIdent } from '../storage/postgres/idempotency.sql';

const ms = (param: string) => `(${param}::float8 * interval '1 millisecond')`;

/** The outbox table's statements for one schema (migration CreateOutboxMessages1764000800000). */
export function outboxSql(schema: string, deadBlocksKey: boolean) {
  const t = `${quoteIdent(schema)}.${quoteIdent('outbox_messages')}`;
  const blocking = deadBlocksKey ? `('pending', 'dead')` : `('pending')`;
  return {
    table: t,
    /** LISTEN/NOTIFY channel the relay wakes on; a short hash keeps it within Postgres' 63-byte identifiers. */
    channel: `idem_outbox_${createHash('sha1').update(schema).digest('hex').slice(0, 16)}`,
    // One statement: rows keep the order given (ordinality), and the notification goes out when the caller commits.
    publish: `
      WITH inserted AS (
        INSERT INTO ${t} (id, topic, key, payload, headers, available_at)
        SELECT m.id, m.topic, m.key, m.payload, m.headers, coalesce(m.available_at, now())
        FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[], $5::jsonb[], $6::timestamptz[])
          WITH ORDINALITY AS m(id, topic, key, payload, headers, available_at, position)
        ORDER BY m.position
        RETURNING 1)
      SELECT count(*)::int AS n, pg_notify($7, '') AS notified FROM inserted`,
    // The head of each key only: a message waits while an earlier one of its key is undelivered (pending, backing off,
    // or dead when dead messages block). Heads another relay holds are skipped, not waited for; its successors are
    // excluded by the NOT EXISTS until that relay commits, so a key never has two messages in flight.
    claim: `
      SELECT m.seq, m.id, m.topic, m.key, m.payload, m.headers, m.attempts, m.created_at
      FROM ${t} m
      WHERE m.status = 'pending' AND m.available_at <= now()
        AND (m.key IS NULL OR NOT EXISTS (
          SELECT 1 FROM ${t} e WHERE e.key = m.key AND e.seq < m.seq AND e.status IN ${blocking}))
      ORDER BY m.seq
      LIMIT $1
      FOR UPDATE OF m SKIP LOCKED`,
    nextDue: `SELECT (extract(epoch FROM min(available_at) - clock_timestamp()) * 1000)::float8 AS ms FROM ${t} WHERE status = 'pending' AND available_at > clock_timestamp()`,
    delivered: `UPDATE ${t} SET status = 'delivered', delivered_at = now(), attempts = attempts + 1, last_error = NULL WHERE seq = ANY($1::bigint[])`,
    // $3 max attempts; delay = min(maxDelay, delay * factor^(attempts so far)).
    failed: `
      UPDATE ${t} m SET
        attempts = m.attempts + 1,
        last_error = f.error,
        status = CASE WHEN m.attempts + 1 >= $3 THEN 'dead' ELSE 'pending' END,
        available_at = clock_timestamp() + ${ms('least($6::float8, $4::float8 * power($5::float8, m.attempts))')}
      FROM unnest($1::bigint[], $2::text[]) AS f(seq, error)
      WHERE m.seq = f.seq`,
    retry: `UPDATE ${t} SET status = 'pending', attempts = 0, available_at = now(), last_error = NULL WHERE id = $1 AND status IN ('dead', 'skipped') RETURNING 1`,
    skip: `UPDATE ${t} SET status = 'skipped' WHERE id = $1 AND status = 'dead' RETURNING 1`,
    exists: `SELECT status FROM ${t} WHERE id = $1`,
    stats: `
      SELECT topic, status, count(*)::int AS n,
             (extract(epoch FROM now() - min(created_at)) * 1000)::float8 AS oldest_ms
      FROM ${t} GROUP BY topic, status`,
    list: `
      SELECT id, topic, key, payload, headers, status, attempts, last_error, created_at, available_at, delivered_at
      FROM ${t}
      WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR topic = $2)
      ORDER BY seq LIMIT $3`,
  };
}

/** The outbox statements' row shapes. */
export interface ClaimedRow {
  seq: string;
  id: string;
  topic: string;
  key: string | null;
  payload: unknown;
  headers: Record<string, string>;
  attempts: number;
  created_at: Date;
}
