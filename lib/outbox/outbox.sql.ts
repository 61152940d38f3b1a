import { createHash } from 'node:crypto';
import { looksLikeOneRow, quoteIdent } from '../storage/postgres/idempotency.sql';

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
    // Two kinds of claimable message, locked with SKIP LOCKED so relays never wait for each other: pending messages
    // without a key, in publish order (index outbox_messages_pending_unkeyed), and the head of each key, its first
    // undelivered message (pending, or dead when dead messages block), when that head is pending and due. Keys are
    // walked in key order from $2 (exclusive) up to $3 (inclusive; NULL: to the end) by a loose scan of
    // outbox_messages_open_key, two index probes per key, so a claim costs what it finds plus the keys it passes,
    // never the whole backlog; a head another relay holds is skipped, and the rest of its key waits behind it.
    // $1 limit, $4 false leaves the unkeyed ones out.
    claim: `
      WITH RECURSIVE keys(key) AS (
        (SELECT o.key FROM ${t} o WHERE o.status IN ('pending', 'dead') AND o.key IS NOT NULL AND o.key > $2 ORDER BY o.key LIMIT 1)
        UNION ALL
        SELECT (SELECT o.key FROM ${t} o WHERE o.status IN ('pending', 'dead') AND o.key IS NOT NULL AND o.key > keys.key ORDER BY o.key LIMIT 1)
        FROM keys WHERE keys.key IS NOT NULL AND ($3::text IS NULL OR keys.key < $3)
      ),
      unkeyed AS (
        SELECT m.seq, m.id, m.topic, m.key, m.payload, m.headers, m.attempts, m.created_at
        FROM ${t} m
        WHERE $4::boolean AND m.status = 'pending' AND m.key IS NULL AND m.available_at <= now()
        ORDER BY m.seq
        LIMIT $1
        FOR UPDATE OF m SKIP LOCKED
      ),
      keyed AS (
        SELECT m.seq, m.id, m.topic, m.key, m.payload, m.headers, m.attempts, m.created_at
        FROM keys
        CROSS JOIN LATERAL (
          SELECT o.seq FROM ${t} o WHERE o.key = keys.key AND o.status IN ${blocking} ORDER BY o.seq LIMIT 1) head
        JOIN ${t} m ON m.seq = head.seq
        WHERE keys.key IS NOT NULL AND ($3::text IS NULL OR keys.key <= $3) AND m.status = 'pending' AND m.available_at <= now()
        LIMIT greatest(0, $1 - (SELECT count(*) FROM unkeyed))
        FOR UPDATE OF m SKIP LOCKED
      )
      SELECT * FROM unkeyed UNION ALL SELECT * FROM keyed`,
    // Run in the claim's transaction after an empty claim: the first message that was not yet due when the claim looked
    // (now() is the transaction's start). Milliseconds from now, negative when it fell due since; messages due then
    // but not claimed are blocked behind their key or held by another relay, and do not count.
    nextDue: `SELECT (extract(epoch FROM min(available_at) - clock_timestamp()) * 1000)::float8 AS ms FROM ${t} WHERE status = 'pending' AND available_at > now()`,
    delivered: `
      UPDATE ${t} m SET status = 'delivered', delivered_at = now(), attempts = m.attempts + 1, last_error = NULL
      FROM unnest($1::bigint[]) WITH ORDINALITY AS d(seq, n)
      WHERE m.seq = d.seq AND ${looksLikeOneRow('d.n')}`,
    // $3 max attempts; delay = min(maxDelay, delay * factor^(attempts so far)).
    failed: `
      UPDATE ${t} m SET
        attempts = m.attempts + 1,
        last_error = f.error,
        status = CASE WHEN m.attempts + 1 >= $3 THEN 'dead' ELSE 'pending' END,
        available_at = clock_timestamp() + ${ms('least($6::float8, $4::float8 * power($5::float8, m.attempts))')}
      FROM unnest($1::bigint[], $2::text[]) WITH ORDINALITY AS f(seq, error, n)
      WHERE m.seq = f.seq AND ${looksLikeOneRow('f.n')}`,
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

/** A value `inlineParams` can write into a statement: bigint ids go as arrays of digit strings. */
export type InlineValue = string | number | boolean | null | readonly string[];

/**
 * `text` with its `$n` parameters written in as literals, so that it can share one simple-protocol round trip with
 * `BEGIN` or `COMMIT` (the extended protocol carries one statement). Strings go through `escape` (the client's
 * `escapeLiteral`); numbers must be integers.
 */
export function inlineParams(text: string, values: readonly InlineValue[], escape: (value: string) => string): string {
  return text.replace(/\$(\d+)/g, (_, n: string) => {
    const value = values[Number(n) - 1];
    if (value === null) return 'NULL';
    if (typeof value === 'boolean') return String(value);
    if (typeof value === 'number') {
      if (!Number.isSafeInteger(value)) throw new Error(`inlineParams: $${n} is not an integer`);
      return String(value);
    }
    if (typeof value === 'string') return escape(value);
    if (!value.every((v) => /^\d+$/.test(v))) throw new Error(`inlineParams: $${n} is not a list of integers`);
    return escape(`{${value.join(',')}}`);
  });
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
