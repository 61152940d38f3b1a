import { createHash } from 'node:crypto';
import { RELEASED_STATUSES } from '../../core/idempotency-record';
import { quoteLiteral } from '../../transaction/inline-statement';

/** The name of the record table. */
export const RECORDS_TABLE = 'idempotency_records';

/** Quotes a Postgres identifier. */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** The predicate of the partial unique index; `ON CONFLICT` must repeat it word for word. */
export const ACTIVE_PREDICATE = `status NOT IN (${RELEASED_STATUSES.map((s) => `'${s}'`).join(', ')})`;

/**
 * A record that decides for its key: a claim whose lease is held (whatever its TTL), a dead holder's claim
 * for another request (reported, so the mismatch shows), or a completed outcome within its TTL.
 */
const LIVE_PREDICATE = (fingerprint: string) => `(
  (status = 'in_progress' AND locked_until > now())
  OR (status = 'in_progress' AND expires_at > now() AND fingerprint <> ${fingerprint})
  OR (status = 'completed' AND expires_at > now()))`;

/**
 * The transactional mode's advisory lock on the key of $1 (scope) and $2 (key) in the records of `schema`: a 64-bit
 * hash, in the one-bigint lock space, which an application's own advisory locks on small numbers do not meet. Advisory
 * locks are per database, so the schema is hashed in: apps with schemas of their own in one database never wait for
 * each other's keys.
 */
function keyLock(schema: string): string {
  return `hashtextextended($2::text, hashtextextended($1::text, hashtextextended(${quoteLiteral(schema)}, 0)))`;
}

/**
 * What a claim's insert does when the key's active row is there (the table is aliased `r`): it takes the row over
 * when no live lease holds it and it has expired, or when it is a dead holder's claim for the same request; else it
 * leaves it (and the claim reports who holds the key).
 */
const TAKE_OVER_ON_CONFLICT = `        ON CONFLICT (scope, key) WHERE ${ACTIVE_PREDICATE}
        DO UPDATE SET fingerprint = EXCLUDED.fingerprint, status = 'in_progress', lease_token = EXCLUDED.lease_token,
          locked_until = EXCLUDED.locked_until, expires_at = EXCLUDED.expires_at, result = NULL, error = NULL,
          attempts = r.attempts + 1, created_at = now(), completed_at = NULL
        WHERE NOT (r.status = 'in_progress' AND r.locked_until > now())
          AND (r.expires_at <= now() OR (r.status = 'in_progress' AND r.fingerprint = EXCLUDED.fingerprint))`;

/** The start of the error `completeInTransaction` fails with when the claim is no longer the record's holder. */
export const CLAIM_TAKEN_OVER = 'idempotency: the claim was taken over; completions written: ';

interface Statement {
  name: string;
  text: string;
}

/** The hot-path statements, named so that pg prepares each once per connection. */
export interface IdempotencySql {
  claim: Statement;
  claimBatch: Statement;
  completeBatch: Statement;
  claimInTransaction: Statement;
  complete: Statement;
  completeInTransaction: Statement;
  release: Statement;
  extend: Statement;
  find: Statement;
  findBatch: Statement;
  recentFailure: Statement;
}

/**
 * One round trip. A live record (completed and unexpired, or any claim whose lease is still held — even past its
 * TTL) is read without a row lock, so replays and duplicates cost no write. Otherwise the key is taken: new,
 * expired, or a dead holder's lease with the same request (taken_over when an existing unreleased row was
 * replaced: attempts only grows on that path). An empty result means the conflicting row is newer than this
 * statement's snapshot: the caller asks again. `ctes` come before the others; `sourceGuard` is ANDed to
 * the inserted row's condition; `acquiredColumn` is computed (as `extra`) on an acquired claim only, after the
 * insert; `otherOutcome` is one more row's source, after the others.
 */
function claimStatement(table: string, variant: ClaimVariant = { ctes: '', sourceGuard: '', acquiredColumn: 'NULL', otherOutcome: '' }): string {
  const { ctes, sourceGuard, acquiredColumn, otherOutcome } = variant;
  const ms = (param: string) => `(${param}::bigint * interval '1 millisecond')`;
  return `
      WITH ${ctes}live AS (
        SELECT id, status AS outcome, fingerprint, result, locked_until, expires_at
          FROM ${table}
         WHERE scope = $1::text AND key = $2::text AND ${ACTIVE_PREDICATE} AND ${LIVE_PREDICATE('$3::text')}
      ), taken AS (
        INSERT INTO ${table} AS r (scope, key, fingerprint, status, lease_token, locked_until, expires_at)
        SELECT $1::text, $2::text, $3::text, 'in_progress', $4::uuid, now() + ${ms('$5')}, now() + ${ms('$6')}
         WHERE NOT EXISTS (SELECT 1 FROM live)${sourceGuard}
${TAKE_OVER_ON_CONFLICT}
        RETURNING r.id, r.attempts
      )
      SELECT id, 'acquired' AS outcome, NULL AS fingerprint, NULL::jsonb AS result, NULL::timestamptz AS locked_until, NULL::timestamptz AS expires_at,
             attempts > 1 AS taken_over, ${acquiredColumn} AS extra
        FROM taken
      UNION ALL
      SELECT id, outcome, fingerprint, result, locked_until, expires_at, NULL::boolean AS taken_over, NULL AS extra FROM live${otherOutcome}`;
}

/**
 * How long a batch statement waits for a row lock before it gives up (and its rows go on their own): a row of one
 * request, held by another transaction (a transactional claim of the same key, a takeover), must not hold up the
 * requests it happens to share a statement with.
 */
export const BATCH_LOCK_TIMEOUT_MS = 100;

/** The batch statements' init plan: it bounds their lock waits, for the statement's own implicit transaction. */
const BOUND_BATCH_LOCK_WAITS = `set_config('lock_timeout', '${BATCH_LOCK_TIMEOUT_MS}', true) IS NOT NULL`;

/**
 * Ends the per-key subquery of a batch (`CROSS JOIN LATERAL (...)`): one index lookup per key, whatever the table's
 * statistics say. As a plain join, the plan Postgres caches with the prepared statement while the table is new (no
 * statistics: it assumes ten pages) scans the whole table, for every key, until autovacuum's first ANALYZE: 20–30 ms
 * per statement once the table held a few thousand rows. LIMIT 1 keeps the subquery from being flattened back into a
 * join; it changes no result, as the partial unique index allows one active row per key.
 */
const ONE_LOOKUP_PER_KEY = 'LIMIT 1';

/**
 * A filter true of every row of a batch's `unnest(...) WITH ORDINALITY` (`ordinal` names the ordinality column), for
 * the planner: it guesses that a two-sided range keeps 0.5% of the rows, so the batch looks like one row and each
 * join of it with a table (an UPDATE's target, a row lock, a read of rows by key) is one index lookup per row of the
 * batch. Without it, the plan Postgres caches with the prepared statement while a table is new (no statistics: ten
 * pages assumed) hashes a scan of the whole table into every statement, until autovacuum's first ANALYZE.
 */
export const looksLikeOneRow = (ordinal: string): string => `${ordinal} BETWEEN 1 AND 2147483647`;

/**
 * The claim statement for several keys at once (distinct scope and key each), in one round trip and one commit:
 * each row of the result names its request by `n`, its position (from 1). A request without a row lost a race
 * against a row newer than the snapshot: the caller claims it again on its own. Rows are inserted in key order, so
 * two batches with the same keys wait for each other in the same order, never in a cycle.
 */
function claimBatchStatement(table: string): string {
  const ms = (param: string) => `(${param}::bigint * interval '1 millisecond')`;
  return `
      WITH guard AS MATERIALIZED (SELECT ${BOUND_BATCH_LOCK_WAITS} AS ok), req AS MATERIALIZED (
        SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::uuid[], $5::bigint[], $6::bigint[])
          WITH ORDINALITY AS q(p_scope, p_key, p_fingerprint, p_token, p_lease, p_ttl, n)
      ), live AS (
        SELECT q.n, r.id, r.outcome, r.fingerprint, r.result, r.locked_until, r.expires_at
          FROM req q CROSS JOIN LATERAL (
            SELECT id, status AS outcome, fingerprint, result, locked_until, expires_at
              FROM ${table}
             WHERE scope = q.p_scope AND key = q.p_key AND ${ACTIVE_PREDICATE} AND ${LIVE_PREDICATE('q.p_fingerprint')}
             ${ONE_LOOKUP_PER_KEY}) r
      ), taken AS (
        INSERT INTO ${table} AS r (scope, key, fingerprint, status, lease_token, locked_until, expires_at)
        SELECT q.p_scope, q.p_key, q.p_fingerprint, 'in_progress', q.p_token, now() + ${ms('q.p_lease')}, now() + ${ms('q.p_ttl')}
          FROM req q
         WHERE NOT EXISTS (SELECT 1 FROM live l WHERE l.n = q.n) AND (SELECT ok FROM guard)
         ORDER BY q.p_scope, q.p_key
${TAKE_OVER_ON_CONFLICT}
        RETURNING r.id, r.attempts, r.lease_token
      )
      SELECT q.n, t.id, 'acquired' AS outcome, NULL AS fingerprint, NULL::jsonb AS result, NULL::timestamptz AS locked_until,
             NULL::timestamptz AS expires_at, t.attempts > 1 AS taken_over
        FROM taken t JOIN req q ON q.p_token = t.lease_token
      UNION ALL
      SELECT n, id, outcome, fingerprint, result, locked_until, expires_at, NULL::boolean AS taken_over FROM live`;
}

interface ClaimVariant {
  ctes: string;
  sourceGuard: string;
  acquiredColumn: string;
  otherOutcome: string;
}

/**
 * A completion's assignments, for the record table unaliased in the expressions (the outcome lives for the claim's
 * ttl from now), with `result` the stored outcome's expression.
 */
const completedWith = (result: string) => `status = 'completed', result = ${result}, locked_until = NULL, completed_at = now(),
        expires_at = now() + (expires_at - created_at)`;

/** A completion's returned expiry, as epoch milliseconds. */
const EXPIRES_MS = 'floor(extract(epoch FROM expires_at) * 1000)::float8 AS expires_ms';

/** What the `find` statements read of a live record (see `find`). */
const FOUND_COLUMNS = `status AS outcome, fingerprint, result,
             floor(extract(epoch FROM CASE WHEN status = 'completed' THEN expires_at ELSE locked_until END) * 1000)::float8 AS until_ms`;

/** Builds the store's statements for one schema. */
export function idempotencySql(schema: string): IdempotencySql {
  const table = `${quoteIdent(schema)}.${quoteIdent(RECORDS_TABLE)}`;
  const ms = (param: string) => `(${param}::bigint * interval '1 millisecond')`;
  const complete = `
      UPDATE ${table} SET ${completedWith('$3::jsonb')}
       WHERE id = $1 AND lease_token = $2 AND status = 'in_progress'
      RETURNING ${EXPIRES_MS}`;
  const statements = {
    claim: claimStatement(table),
    claimBatch: claimBatchStatement(table),
    // The completions of several claims in one round trip and one commit (see claimBatch for the lock wait's bound).
    completeBatch: `
      WITH guard AS MATERIALIZED (SELECT ${BOUND_BATCH_LOCK_WAITS} AS ok)
      UPDATE ${table} AS t SET ${completedWith('q.result::jsonb')}
        FROM unnest($1::bigint[], $2::uuid[], $3::text[]) WITH ORDINALITY AS q(id, token, result, n)
       WHERE t.id = q.id AND t.lease_token = q.token AND t.status = 'in_progress' AND (SELECT ok FROM guard) AND ${looksLikeOneRow('q.n')}
      RETURNING t.id, ${EXPIRES_MS}`,
    // The claim of the transactional mode, as the first statement of the handler's transaction (nothing of it is
    // visible before that commits). Every claimer of the key in this mode first takes a transaction-level advisory
    // lock on it, so another uncommitted claim shows as that lock held, told apart from any other lock wait (a
    // relation extension lock, autovacuum's truncation), which a 1 ms lock_timeout at the unique index could not:
    // with $10 = 0 the lock is only tried (the outcome is 'held' when another claimer has it), with $10 = 1 it is
    // waited for. lock_timeout is $7 ms while the claim runs, then restored to $8; idle_in_transaction_session_timeout
    // is $9 ms (the lease) for the rest of the transaction, so a hung holder's transaction ends and frees the key.
    // The guard is an init plan of the INSERT's source row: computed before the row is inserted and waits.
    claimInTransaction: claimStatement(table, {
      ctes: `guard AS MATERIALIZED (
        SELECT set_config('lock_timeout', $7::text, true) IS NOT NULL
           AND set_config('idle_in_transaction_session_timeout', $9::text, true) IS NOT NULL
           AND CASE WHEN $10::int = 1 THEN pg_advisory_xact_lock(${keyLock(schema)})::text IS NOT NULL
                    ELSE pg_try_advisory_xact_lock(${keyLock(schema)}) END AS free
      ), `,
      sourceGuard: `
           AND (SELECT free FROM guard)`,
      acquiredColumn: `set_config('lock_timeout', $8::text, true)`,
      otherOutcome: `
      UNION ALL
      SELECT NULL, 'held', NULL, NULL, NULL, NULL, NULL, NULL WHERE NOT (SELECT free FROM guard)`,
    }),
    // The outcome lives for the claim's ttl from now: the claim set expires_at = created_at + ttl. Its expiry comes
    // back as epoch milliseconds (a float8, read with parseFloat), so no timestamptz is parsed on every completion.
    complete,
    // The completion of the transactional mode, sent with the COMMIT after it in one round trip: should the claim's
    // token no longer hold the record, the statement fails (its message starts with CLAIM_TAKEN_OVER), so that the
    // COMMIT is never run. The failing cast is computed from the aggregate, so the planner cannot fold it beforehand.
    completeInTransaction: `
      WITH done AS (${complete})
      SELECT expires_ms FROM done
      UNION ALL
      SELECT CAST('${CLAIM_TAKEN_OVER}' || count(*) AS float8) FROM done HAVING count(*) = 0`,
    release: `
      UPDATE ${table} SET status = 'failed', error = $3::jsonb, locked_until = NULL, completed_at = now()
       WHERE id = $1 AND lease_token = $2 AND status = 'in_progress'`,
    extend: `
      UPDATE ${table} SET locked_until = now() + ${ms('$3')}
       WHERE id = $1 AND lease_token = $2 AND status = 'in_progress'`,
    recentFailure: `
      SELECT error FROM ${table}
       WHERE scope = $1 AND key = $2 AND status = 'failed' AND error IS NOT NULL AND completed_at >= now() - ${ms('$3')}
       ORDER BY completed_at DESC LIMIT 1`,
    // A Postgres-only replay is this one read: only what a replay needs, and the one instant that matters (the
    // outcome's expiry, or the holder's lease) as epoch milliseconds, a float8 that pg reads with parseFloat where a
    // timestamptz costs a date parse.
    find: `
      SELECT ${FOUND_COLUMNS}
        FROM ${table}
       WHERE scope = $1::text AND key = $2::text AND ${ACTIVE_PREDICATE} AND ${LIVE_PREDICATE('fingerprint')}`,
    // The reads of several keys in one round trip: `n` is the position of a key that has a live record, from 1.
    findBatch: `
      SELECT q.n, r.*
        FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS q(p_scope, p_key, n)
        CROSS JOIN LATERAL (
          SELECT ${FOUND_COLUMNS}
            FROM ${table}
           WHERE scope = q.p_scope AND key = q.p_key AND ${ACTIVE_PREDICATE} AND ${LIVE_PREDICATE('fingerprint')}
           ${ONE_LOOKUP_PER_KEY}) r`,
  };
  // Statement names must differ per schema: pg caches prepared statements per connection by name.
  const suffix = createHash('sha1').update(schema).digest('hex').slice(0, 8);
  const named = {} as IdempotencySql;
  for (const [name, text] of Object.entries(statements)) {
    named[name as keyof IdempotencySql] = { name: `idem_${name}_${suffix}`, text };
  }
  return named;
}
