import { createHash } from 'node:crypto';
import { looksLikeOneRow, quoteIdent } from '../../storage/postgres/idempotency.sql';
import { RELEASED_WORKFLOW_STATUSES } from '../workflow.interfaces';

/** Table names. */
export const EXECUTIONS_TABLE = 'workflow_executions';
export const STEPS_TABLE = 'workflow_steps';
export const WAITS_TABLE = 'workflow_waits';
export const MESSAGES_TABLE = 'workflow_messages';
export const EVENTS_TABLE = 'workflow_events';

/** The predicate of the partial unique index on workflow_id; `ON CONFLICT` repeats it word for word. */
export const LIVE_PREDICATE = `status NOT IN (${RELEASED_WORKFLOW_STATUSES.map((s) => `'${s}'`).join(', ')})`;

/** A named statement: pg prepares it once per connection. */
export interface Statement {
  name: string;
  text: string;
}

const STATEMENTS = (e: string, s: string, w: string, m: string, v: string) => {
  const ms = (param: string) => `(${param}::bigint * interval '1 millisecond')`;
  const stepJson = `json_build_object('position', s.position, 'name', s.name, 'status', s.status, 'result', s.result,
    'error', s.error, 'attempts', s.attempts, 'completed_at', s.completed_at, 'seq', s.seq, 'args_hash', s.args_hash)`;
  const stepColumns = 'position, name, status, result, error, attempts, completed_at, seq, args_hash';
  return {
    // One round trip: insert, or read back the execution holding the id. Empty means the holder committed
    // after this statement's snapshot: ask again.
    insert: `
      WITH ins AS (
        INSERT INTO ${e} AS x (id, workflow_id, workflow_name, status, input, input_hash, deadline_at, parent_execution_id, kind)
        VALUES ($1, $2, $3, 'pending', $4::jsonb, $5, CASE WHEN $6::bigint IS NULL THEN NULL ELSE now() + ${ms('$6')} END, $7::uuid, $8)
        ON CONFLICT (workflow_id) WHERE ${LIVE_PREDICATE} DO NOTHING
        RETURNING *
      )
      SELECT true AS inserted, ins.* FROM ins
      UNION ALL
      SELECT false, x.* FROM ${e} x WHERE x.workflow_id = $2 AND x.${LIVE_PREDICATE} AND NOT EXISTS (SELECT 1 FROM ins)`,
    // insert for many executions in one round trip ($1..$8: arrays of insert's parameters, one request per workflow
    // id; inputs as JSON text). Each answer carries its request's ordinal; a request that gets no row (its holder
    // committed after this statement's snapshot) is asked again on its own.
    insertMany: `
      WITH req AS (
        SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::uuid[], $8::text[])
          WITH ORDINALITY AS r(id, workflow_id, workflow_name, input, input_hash, timeout_ms, parent_execution_id, kind, i) WHERE ${looksLikeOneRow('r.i')}
      ), ins AS (
        INSERT INTO ${e} AS x (id, workflow_id, workflow_name, status, input, input_hash, deadline_at, parent_execution_id, kind)
        SELECT id, workflow_id, workflow_name, 'pending', input::jsonb, input_hash,
               CASE WHEN timeout_ms IS NULL THEN NULL ELSE now() + (timeout_ms * interval '1 millisecond') END, parent_execution_id, kind
          FROM req ORDER BY i
        ON CONFLICT (workflow_id) WHERE ${LIVE_PREDICATE} DO NOTHING
        RETURNING *
      )
      SELECT req.i::int AS i, true AS inserted, ins.* FROM ins JOIN req ON req.id = ins.id
      UNION ALL
      SELECT req.i::int, false, x.* FROM req JOIN ${e} x ON x.workflow_id = req.workflow_id AND x.${LIVE_PREDICATE}
       WHERE req.id NOT IN (SELECT id FROM ins)`,
    // first_run: no run of this execution began before (its step jobs cannot exist yet; see StepJobData.fresh). 'prev'
    // locks the row before 'x' updates it (x reads prev, so prev runs first), so a concurrent begin sees the other's start.
    begin: `
      WITH prev AS (
        SELECT started_at IS NULL AS first_run FROM ${e} WHERE id = $1 AND status IN ('pending', 'running') FOR UPDATE
      ), x AS (
        UPDATE ${e} SET status = 'running', started_at = coalesce(started_at, now()), updated_at = now(),
               suspended_until = NULL, wake_requested = false,
               recovery_attempts = recovery_attempts + CASE WHEN status = 'running' THEN 1 ELSE 0 END
         WHERE id = $1 AND status IN ('pending', 'running') AND EXISTS (SELECT 1 FROM prev)
        RETURNING *
      )
      SELECT x.*, (SELECT first_run FROM prev) AS first_run,
             coalesce((SELECT json_agg(${stepJson} ORDER BY s.seq) FROM ${s} s WHERE s.execution_id = $1), '[]'::json) AS steps,
             (SELECT json_object_agg(w.position, json_build_object('kind', w.kind, 'argsHash', w.args_hash,
                       'wakeAt', CASE WHEN w.wake_at = 'infinity' THEN NULL ELSE (extract(epoch FROM w.wake_at) * 1000)::float8 END))
                FROM ${w} w WHERE w.execution_id = $1) AS waits
        FROM x`,
    finish: `
      UPDATE ${e} SET status = $2, result = $3::jsonb, error = $4::jsonb, updated_at = now(), completed_at = now(),
             delivered_through = $5::int, ended_by = $6::int[]
       WHERE id = $1 AND status IN ('pending', 'running')`,
    recordRunEnd: `UPDATE ${e} SET delivered_through = $2::int, ended_by = $3::int[] WHERE id = $1 AND status = 'cancelled'`,
    markRunning: `
      UPDATE ${e} SET status = 'running', started_at = coalesce(started_at, now()), updated_at = now()
       WHERE id = $1 AND status IN ('pending', 'running') RETURNING id`,
    release: `UPDATE ${e} SET status = 'pending', updated_at = now() WHERE id = $1 AND status = 'running'`,
    stepState: `
      SELECT x.status AS execution_status, s.position, s.name, s.status, s.result, s.error, s.attempts, s.completed_at, s.seq, s.args_hash
        FROM ${e} x LEFT JOIN ${s} s ON s.execution_id = x.id AND s.position = $2 AND s.status <> 'retrying'
       WHERE x.id = $1`,
    // One round trip. A new position takes the execution's next sequence number: the UPDATE holds the execution's
    // row lock until commit, so numbers become visible in order (a writer that loses the race on the position
    // leaves a gap, never a duplicate). A 'retrying' row (resume) is overwritten in place and keeps its number.
    // It also answers the execution's status and recovery count (as of the row lock when it took a number), so the
    // run learns of a cancellation, or of another run, from the step's checkpoint without a read of its own.
    checkpoint: `
      WITH slot AS (
        SELECT seq FROM ${s} WHERE execution_id = $1::uuid AND position = $2::int AND status = 'retrying'
      ), counter AS (
        UPDATE ${e} SET next_step_seq = next_step_seq + 1
         WHERE id = $1::uuid AND NOT EXISTS (SELECT 1 FROM ${s} WHERE execution_id = $1::uuid AND position = $2::int)
        RETURNING next_step_seq - 1 AS seq, status, recovery_attempts
      ), ins AS (
        INSERT INTO ${s} AS t (execution_id, position, name, status, result, error, attempts, args_hash, seq)
        SELECT $1::uuid, $2::int, $3::text, $4::text, $5::jsonb, $6::jsonb, $7::int, $8::text, n.seq
          FROM (SELECT seq FROM slot UNION ALL SELECT seq FROM counter) n
        ON CONFLICT (execution_id, position) DO UPDATE
           SET name = EXCLUDED.name, status = EXCLUDED.status, result = EXCLUDED.result, error = EXCLUDED.error,
               attempts = EXCLUDED.attempts, args_hash = EXCLUDED.args_hash, completed_at = now()
         WHERE t.status = 'retrying'
        RETURNING ${stepColumns}
      ), cur AS (
        SELECT status, recovery_attempts FROM counter
        UNION ALL
        SELECT status, recovery_attempts FROM ${e} WHERE id = $1::uuid AND NOT EXISTS (SELECT 1 FROM counter)
      )
      SELECT true AS written, ins.*, cur.status AS execution_status, cur.recovery_attempts FROM ins, cur
      UNION ALL
      SELECT false, ${stepColumns.split(', ').map((c) => `s.${c}`).join(', ')}, cur.status, cur.recovery_attempts
        FROM ${s} s, cur WHERE s.execution_id = $1::uuid AND s.position = $2::int AND s.status <> 'retrying' AND NOT EXISTS (SELECT 1 FROM ins)`,
    // A task job's attempt, for one or many jobs in one round trip ($1 execution ids, $2 positions): marks each
    // execution running (as markRunning) and reads its status and the checkpoint at the position (as stepState); 'x'
    // answers the status it set, the outer read sees the snapshot. Each answer carries its request's ordinal. The rows
    // are locked in id order, so two batches never wait on each other in a cycle.
    startTaskAttempts: `
      WITH req AS (
        SELECT * FROM unnest($1::uuid[], $2::int[]) WITH ORDINALITY AS r(id, position, i) WHERE ${looksLikeOneRow('r.i')}
      ), lk AS (
        SELECT id FROM ${e} WHERE id IN (SELECT id FROM req) AND status IN ('pending', 'running') ORDER BY id FOR UPDATE
      ), x AS (
        UPDATE ${e} SET status = 'running', started_at = coalesce(started_at, now()), updated_at = now()
         WHERE id IN (SELECT id FROM lk) AND status IN ('pending', 'running')
        RETURNING id, status
      )
      SELECT req.i::int AS i, coalesce(x.status, e0.status) AS execution_status,
             s.position, s.name, s.status, s.result, s.error, s.attempts, s.completed_at, s.seq, s.args_hash
        FROM req JOIN ${e} e0 ON e0.id = req.id LEFT JOIN x ON x.id = req.id
        LEFT JOIN ${s} s ON s.execution_id = req.id AND s.position = req.position AND s.status <> 'retrying'`,
    // Checkpoints (end status NULL) and task outcomes, for one or many jobs in one round trip ($1..$9: arrays of the
    // parameters of 'checkpoint' and the end status, one request per execution; results and errors as JSON text).
    // Each checkpoint is written as 'checkpoint' writes it and, for a task, only when this statement wrote it, its
    // execution ends with it as 'finish' would (a compare-and-set from pending/running). 'prev' locks the executions'
    // rows in id order (two batches never wait on each other in a cycle) and gives each its next sequence number;
    // 'x' updates each row once (a statement may not update a row twice) after 'ins' (x reads ins). A loser gets the
    // winner's row. Each answer carries its request's ordinal.
    checkpoints: `
      WITH req AS (
        SELECT * FROM unnest($1::uuid[], $2::int[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[], $8::text[], $9::text[])
          WITH ORDINALITY AS r(id, position, name, status, result, error, attempts, args_hash, end_status, i) WHERE ${looksLikeOneRow('r.i')}
      ), slot AS (
        SELECT t.execution_id, t.seq FROM ${s} t JOIN req ON t.execution_id = req.id AND t.position = req.position WHERE t.status = 'retrying'
      ), prev AS (
        SELECT id, status, recovery_attempts, next_step_seq FROM ${e} WHERE id IN (SELECT id FROM req) ORDER BY id FOR UPDATE
      ), ins AS (
        INSERT INTO ${s} AS t (execution_id, position, name, status, result, error, attempts, args_hash, seq)
        SELECT req.id, req.position, req.name, req.status, req.result::jsonb, req.error::jsonb, req.attempts, req.args_hash, coalesce(slot.seq, prev.next_step_seq)
          FROM req JOIN prev ON prev.id = req.id LEFT JOIN slot ON slot.execution_id = req.id
        ON CONFLICT (execution_id, position) DO UPDATE
           SET name = EXCLUDED.name, status = EXCLUDED.status, result = EXCLUDED.result, error = EXCLUDED.error,
               attempts = EXCLUDED.attempts, args_hash = EXCLUDED.args_hash, completed_at = now()
         WHERE t.status = 'retrying'
        RETURNING execution_id, ${stepColumns}
      ), x AS (
        UPDATE ${e} AS u SET next_step_seq = u.next_step_seq + CASE WHEN EXISTS (SELECT 1 FROM slot WHERE slot.execution_id = u.id) THEN 0 ELSE 1 END,
               updated_at = CASE WHEN req.end_status IS NULL THEN u.updated_at ELSE now() END,
               status = CASE WHEN req.end_status IS NOT NULL AND u.status IN ('pending', 'running') THEN req.end_status ELSE u.status END,
               result = CASE WHEN req.end_status IS NOT NULL AND u.status IN ('pending', 'running') THEN req.result::jsonb ELSE u.result END,
               error = CASE WHEN req.end_status IS NOT NULL AND u.status IN ('pending', 'running') THEN req.error::jsonb ELSE u.error END,
               completed_at = CASE WHEN req.end_status IS NOT NULL AND u.status IN ('pending', 'running') THEN now() ELSE u.completed_at END,
               delivered_through = CASE WHEN req.end_status IS NOT NULL AND u.status IN ('pending', 'running') THEN NULL ELSE u.delivered_through END,
               ended_by = CASE WHEN req.end_status IS NOT NULL AND u.status IN ('pending', 'running') THEN NULL ELSE u.ended_by END
          FROM req
         WHERE u.id = req.id AND u.id IN (SELECT execution_id FROM ins)
        RETURNING u.id
      )
      SELECT req.i::int AS i, true AS written, ${stepColumns.split(', ').map((c) => `ins.${c}`).join(', ')}, prev.status AS execution_status, prev.recovery_attempts
        FROM ins JOIN req ON req.id = ins.execution_id JOIN prev ON prev.id = req.id
      UNION ALL
      SELECT req.i::int, false, ${stepColumns.split(', ').map((c) => `t.${c}`).join(', ')}, prev.status, prev.recovery_attempts
        FROM req JOIN prev ON prev.id = req.id JOIN ${s} t ON t.execution_id = req.id AND t.position = req.position AND t.status <> 'retrying'
       WHERE req.id NOT IN (SELECT execution_id FROM ins)`,
    recordedBetween: `
      SELECT ${stepColumns} FROM ${s} WHERE execution_id = $1 AND seq >= $2 AND seq < $3 ORDER BY seq`,
    get: `SELECT * FROM ${e} WHERE id = $1`,
    latest: `
      SELECT * FROM ${e} WHERE workflow_id = $1
       ORDER BY (${LIVE_PREDICATE}) DESC, created_at DESC LIMIT 1`,
    // Cancels the live execution and, in the same statement, its unfinished child workflows at any depth.
    cancel: `
      WITH RECURSIVE root AS (
        UPDATE ${e} SET status = 'cancelled', updated_at = now(), completed_at = now(), suspended_until = NULL
         WHERE workflow_id = $1 AND status IN ('pending', 'running') AND ($2::text IS NULL OR kind = $2::text)
        RETURNING *
      ), tree(id) AS (
        SELECT id FROM root
        UNION
        -- OFFSET 0 keeps the children's look-up a per-parent index probe: as a join, a plan made before the table's
        -- first ANALYZE hashes a scan of the whole table
        SELECT c.id FROM tree t CROSS JOIN LATERAL (SELECT id FROM ${e} WHERE parent_execution_id = t.id OFFSET 0) c
      ), children AS (
        UPDATE ${e} SET status = 'cancelled', updated_at = now(), completed_at = now(), suspended_until = NULL
         WHERE id IN (SELECT id FROM tree) AND id NOT IN (SELECT id FROM root) AND status IN ('pending', 'running')
        RETURNING id
      )
      SELECT root.*, (SELECT count(*) FROM children)::int AS cancelled_children FROM root`,
    resume: `
      UPDATE ${e} SET status = 'pending', error = NULL, result = NULL, recovery_attempts = 0, completed_at = NULL, updated_at = now(),
             delivered_through = NULL, ended_by = NULL,
             deadline_at = CASE WHEN deadline_at IS NULL THEN NULL ELSE now() + (deadline_at - created_at) END
       WHERE id = $1 AND status IN ('failed', 'cancelled')
      RETURNING *`,
    // Resume re-runs the failures the last run did not handle: those whose errors ended it (ended_by) and those it
    // never received (recorded after delivered_through). Failures it received and survived are history, thrown
    // again on replay. Without a record (recovery exhausted, cancelled while no run was live, older versions) the
    // last recorded failure is re-run. The rows stay, as 'retrying', so the re-run keeps its place in the order.
    // Runs before 'resume' in one transaction (it reads what 'resume' then clears).
    retryFailedSteps: `
      UPDATE ${s} t SET status = 'retrying'
        FROM ${e} x
       WHERE t.execution_id = $1 AND x.id = $1 AND x.status IN ('failed', 'cancelled') AND t.status = 'failed'
         AND (t.position = ANY(coalesce(x.ended_by, '{}'::int[]))
              OR (x.delivered_through IS NOT NULL AND t.seq > x.delivered_through)
              OR (x.delivered_through IS NULL AND t.seq = (SELECT max(m.seq) FROM ${s} m WHERE m.execution_id = $1)))
      RETURNING t.position, t.name, 'failed'::text AS status, t.result, t.error, t.attempts, t.completed_at, t.seq, t.args_hash`,
    steps: `SELECT ${stepColumns} FROM ${s} WHERE execution_id = $1 AND status <> 'retrying' ORDER BY position`,
    unfinished: `
      SELECT id, workflow_name, status, updated_at::text AS cursor, wake_requested,
             CASE WHEN suspended_until IS NULL THEN NULL WHEN suspended_until = 'infinity' THEN 'Infinity'::float8
                  ELSE (extract(epoch FROM suspended_until) * 1000)::float8 END AS suspended_ms
        FROM ${e}
       WHERE status IN ('pending', 'running') AND updated_at < now() - ${ms('$1')}
         AND ($3::timestamptz IS NULL OR (updated_at, id) > ($3::timestamptz, $4::uuid))
       ORDER BY updated_at, id LIMIT $2`,
    // The reconciler counts the incident and hands the execution back as pending, so the run it re-enqueues does
    // not count the same incident again in begin() (which counts only a run found still 'running').
    countRecovery: `
      UPDATE ${e} SET recovery_attempts = recovery_attempts + 1, status = 'pending', updated_at = now()
       WHERE id = $1 AND status IN ('pending', 'running')
      RETURNING recovery_attempts`,
    timeOutExpired: `
      UPDATE ${e} SET status = 'timed_out', updated_at = now(), completed_at = now(),
             error = jsonb_build_object('name', 'WorkflowTimeoutError', 'message', 'the workflow did not finish before its timeout')
       WHERE status IN ('pending', 'running') AND deadline_at < now()
      RETURNING id`,
    // Retention "0": only once no result() call is waiting for the outcome (the last waiter removes it then).
    deleteFinished: `
      DELETE FROM ${e} WHERE id = $1 AND status IN ('completed', 'failed', 'cancelled', 'timed_out') AND result_waiters = 0`,
    // Registers a result() waiter on an unfinished execution, or reads a finished one, in one statement. Empty (or
    // unfinished and not watching) means the row changed after this statement's snapshot: ask again.
    watch: `
      WITH w AS (
        UPDATE ${e} SET result_waiters = result_waiters + 1 WHERE id = $1 AND status IN ('pending', 'running')
        RETURNING *
      )
      SELECT true AS watching, w.* FROM w
      UNION ALL
      SELECT false, x.* FROM ${e} x WHERE x.id = $1 AND NOT EXISTS (SELECT 1 FROM w)`,
    // The durable wait at a position: registered once; a replay reads the stored wake-up time back.
    registerWait: `
      WITH ins AS (
        INSERT INTO ${w} (execution_id, position, kind, args_hash, wake_at)
        VALUES ($1, $2, $3, $5, CASE WHEN $4::bigint IS NULL THEN 'infinity'::timestamptz ELSE now() + ${ms('$4')} END)
        ON CONFLICT (execution_id, position) DO NOTHING
        RETURNING kind, args_hash, wake_at
      ), found AS (
        SELECT kind, args_hash, wake_at FROM ins
        UNION ALL
        SELECT kind, args_hash, wake_at FROM ${w} WHERE execution_id = $1 AND position = $2 AND NOT EXISTS (SELECT 1 FROM ins)
      )
      SELECT kind, args_hash, CASE WHEN wake_at = 'infinity' THEN NULL ELSE (extract(epoch FROM wake_at) * 1000)::float8 END AS wake_ms FROM found`,
    // One statement: takes the oldest unread message of the topic (row-locked), checkpoints it at the position the way
    // 'checkpoint' does, and marks it consumed only if that checkpoint was written — so a message is consumed once,
    // and stays unread when the position already holds an outcome (a timeout, a racing run). Locks: message, then
    // execution row; 'send' takes only the execution row, so the two never wait on each other in a cycle.
    receive: `
      WITH msg AS (
        SELECT seq, message FROM ${m} WHERE execution_id = $1::uuid AND topic = $3 AND consumed_position IS NULL
         ORDER BY seq LIMIT 1 FOR UPDATE
      ), slot AS (
        SELECT seq FROM ${s} WHERE execution_id = $1::uuid AND position = $2::int AND status = 'retrying' AND EXISTS (SELECT 1 FROM msg)
      ), counter AS (
        UPDATE ${e} SET next_step_seq = next_step_seq + 1
         WHERE id = $1::uuid AND EXISTS (SELECT 1 FROM msg) AND NOT EXISTS (SELECT 1 FROM ${s} WHERE execution_id = $1::uuid AND position = $2::int)
        RETURNING next_step_seq - 1 AS seq
      ), ins AS (
        INSERT INTO ${s} AS t (execution_id, position, name, status, result, error, attempts, args_hash, seq)
        SELECT $1::uuid, $2::int, '@recv', 'completed', jsonb_build_object('message', msg.message), NULL, 1, $4::text, n.seq
          FROM msg, (SELECT seq FROM slot UNION ALL SELECT seq FROM counter) n
        ON CONFLICT (execution_id, position) DO UPDATE
           SET name = EXCLUDED.name, status = EXCLUDED.status, result = EXCLUDED.result, error = EXCLUDED.error,
               attempts = EXCLUDED.attempts, args_hash = EXCLUDED.args_hash, completed_at = now()
         WHERE t.status = 'retrying'
        RETURNING ${stepColumns}
      ), consumed AS (
        UPDATE ${m} SET consumed_position = $2::int WHERE seq = (SELECT seq FROM msg) AND EXISTS (SELECT 1 FROM ins)
      )
      SELECT true AS written, ins.* FROM ins
      UNION ALL
      SELECT false, ${stepColumns.split(', ').map((c) => `s.${c}`).join(', ')}
        FROM ${s} s WHERE s.execution_id = $1::uuid AND s.position = $2::int AND s.status <> 'retrying' AND NOT EXISTS (SELECT 1 FROM ins)`,
    // The newest execution of the id, locked, so that a message never lands in an execution finishing meanwhile.
    send: `
      WITH x AS (
        SELECT * FROM ${e} WHERE workflow_id = $1 ORDER BY (${LIVE_PREDICATE}) DESC, created_at DESC LIMIT 1 FOR UPDATE
      ), ins AS (
        INSERT INTO ${m} (execution_id, topic, message, idempotency_key)
        SELECT x.id, $2, $3::jsonb, $4 FROM x WHERE x.status IN ('pending', 'running')
        ON CONFLICT (execution_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING seq
      ), woke AS (
        UPDATE ${e} SET wake_requested = true WHERE id IN (SELECT id FROM x WHERE status IN ('pending', 'running'))
        RETURNING id
      )
      SELECT x.*, EXISTS (SELECT 1 FROM ins) AS stored,
             $4::text IS NOT NULL AND EXISTS (SELECT 1 FROM ${m} d, x WHERE d.execution_id = x.id AND d.idempotency_key = $4) AS duplicate
        FROM x`,
    // Fails (status still 'running') when a message or a child asked for a wake since the run began.
    suspend: `
      WITH u AS (
        UPDATE ${e} SET status = 'pending', updated_at = now(),
               suspended_until = CASE WHEN $2::float8 = 'Infinity'::float8 THEN 'infinity'::timestamptz ELSE to_timestamp($2::float8 / 1000) END
         WHERE id = $1 AND status = 'running' AND NOT wake_requested
        RETURNING id
      )
      SELECT EXISTS (SELECT 1 FROM u) AS suspended, x.status FROM ${e} x WHERE x.id = $1`,
    wakeRequested: `SELECT wake_requested FROM ${e} WHERE id = $1`,
    requestWake: `UPDATE ${e} SET wake_requested = true WHERE id = $1 AND status IN ('pending', 'running') RETURNING *`,
    setEvent: `
      INSERT INTO ${v} (execution_id, key, value) VALUES ($1, $2, $3::jsonb)
      ON CONFLICT (execution_id, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()`,
    getEvent: `
      SELECT x.*, ev.value AS event_value, ev.key IS NOT NULL AS event_found
        FROM (SELECT * FROM ${e} WHERE workflow_id = $1 ORDER BY (${LIVE_PREDICATE}) DESC, created_at DESC LIMIT 1) x
        LEFT JOIN ${v} ev ON ev.execution_id = x.id AND ev.key = $2`,
    unwatch: `
      UPDATE ${e} SET result_waiters = greatest(result_waiters - 1, 0) WHERE id = $1
      RETURNING result_waiters, status`,
  };
};

/** The workflow statements. */
export type WorkflowSql = { [K in keyof ReturnType<typeof STATEMENTS>]: Statement } & { executionsTable: string; stepsTable: string; lockKey: string };

/** Builds the named statements for a schema (names differ per schema: pg caches them per connection by name). */
export function workflowSql(schema: string): WorkflowSql {
  const executions = `${quoteIdent(schema)}.${quoteIdent(EXECUTIONS_TABLE)}`;
  const steps = `${quoteIdent(schema)}.${quoteIdent(STEPS_TABLE)}`;
  const table = (name: string) => `${quoteIdent(schema)}.${quoteIdent(name)}`;
  const suffix = createHash('sha1').update(schema).digest('hex').slice(0, 8);
  const named = { executionsTable: executions, stepsTable: steps, lockKey: `nestjs-idempotency:workflow-reconciler:${schema}` } as WorkflowSql;
  for (const [name, text] of Object.entries(STATEMENTS(executions, steps, table(WAITS_TABLE), table(MESSAGES_TABLE), table(EVENTS_TABLE)))) {
    (named as unknown as Record<string, Statement>)[name] = { name: `wf_${name}_${suffix}`, text };
  }
  return named;
}
