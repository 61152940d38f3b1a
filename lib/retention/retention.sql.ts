import { quoteIdent } from '../storage/postgres/idempotency.sql';

const ms = (param: string) => `(${param}::bigint * interval '1 millisecond')`;

/**
 * Batched deletes, each a single short statement that removes at most `$n` rows found through an index:
 * records by `expires_at`, inbox ids by `processed_at`, executions by (`workflow_name`, `completed_at`).
 * None of them touches an unfinished record or the checkpoints of a live execution.
 */
export function retentionSql(schema: string) {
  const t = (name: string) => `${quoteIdent(schema)}.${quoteIdent(name)}`;
  // Every predicate stands twice: in the subquery that picks a batch (skipping rows a claim holds), and in
  // the outer WHERE, which Postgres re-checks against the newest row version should one change meanwhile.
  const records = `expires_at < now()
           AND (status = 'completed'
                OR (status = 'in_progress' AND locked_until < now())
                OR (status IN ('failed', 'cancelled', 'timed_out') AND completed_at < now() - ${ms('$1')}))`;
  // An execution a result() call is still reading waits for it (the waiter removes it under retention "0"); a count
  // left by a waiter that died is ignored an hour after completion.
  const finished = (extra: string) => `${extra} AND completed_at IS NOT NULL AND completed_at <= now() - ${ms('$2')}
           AND status IN ('completed', 'failed', 'cancelled', 'timed_out')
           AND (result_waiters = 0 OR completed_at < now() - interval '1 hour')`;
  const named = finished('workflow_name = $1');
  const others = finished('NOT (workflow_name = ANY($1::text[]))');
  return {
    records: `
      DELETE FROM ${t('idempotency_records')} WHERE ${records} AND id IN (
        SELECT id FROM ${t('idempotency_records')} WHERE ${records} LIMIT $2 FOR UPDATE SKIP LOCKED)`,
    inbox: `
      DELETE FROM ${t('inbox_messages')} WHERE processed_at < now() - ${ms('$1')} AND (consumer, message_id) IN (
        SELECT consumer, message_id FROM ${t('inbox_messages')} WHERE processed_at < now() - ${ms('$1')} LIMIT $2 FOR UPDATE SKIP LOCKED)`,
    workflows: `
      DELETE FROM ${t('workflow_executions')} WHERE ${named} AND id IN (
        SELECT id FROM ${t('workflow_executions')} WHERE ${named} LIMIT $3 FOR UPDATE SKIP LOCKED)
      RETURNING workflow_id`,
    otherWorkflows: `
      DELETE FROM ${t('workflow_executions')} WHERE ${others} AND id IN (
        SELECT id FROM ${t('workflow_executions')} WHERE ${others} LIMIT $3 FOR UPDATE SKIP LOCKED)
      RETURNING workflow_id`,
    outbox: `
      DELETE FROM ${t('outbox_messages')} WHERE status = 'delivered' AND delivered_at < now() - ${ms('$1')} AND seq IN (
        SELECT seq FROM ${t('outbox_messages')} WHERE status = 'delivered' AND delivered_at < now() - ${ms('$1')} LIMIT $2 FOR UPDATE SKIP LOCKED)`,
    lockKey: `nestjs-idempotency:retention:${schema}`,
  };
}
