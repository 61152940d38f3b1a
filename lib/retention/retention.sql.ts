import { quoteIdent } from '../storage/postgres/idempotency.sql';

const ms = (param: string) => `(${param}::bigint * interval '1 millisecond')`;

/**
 * Batched deletes, each a single short statement that removes at most `$n` rows found through an index:
 * records by `expires_at`, inbox ids by `processed_at`, executions by (`workflow_name`, `completed_at`).
 * None of them touches an unfinished record or the checkpoints of a live execution.
 */
export function retentionSql(schema: string) {
  const t = (name: string) => `${quoteIdent(schema)}.${quoteIdent(name)}`;
  return {
    records: `
      DELETE FROM ${t('idempotency_records')} WHERE id IN (
        SELECT id FROM ${t('idempotency_records')}
         WHERE expires_at < now()
           AND (status = 'completed'
                OR (status = 'in_progress' AND locked_until < now())
                OR (status IN ('failed', 'cancelled', 'timed_out') AND completed_at < now() - ${ms('$1')}))
         LIMIT $2)`,
    inbox: `
      DELETE FROM ${t('inbox_messages')} WHERE (consumer, message_id) IN (
        SELECT consumer, message_id FROM ${t('inbox_messages')} WHERE processed_at < now() - ${ms('$1')} LIMIT $2)`,
    workflows: `
      DELETE FROM ${t('workflow_executions')} WHERE id IN (
        SELECT id FROM ${t('workflow_executions')}
         WHERE workflow_name = $1 AND completed_at IS NOT NULL AND completed_at <= now() - ${ms('$2')}
           AND status IN ('completed', 'failed', 'cancelled', 'timed_out')
         LIMIT $3)`,
    otherWorkflows: `
      DELETE FROM ${t('workflow_executions')} WHERE id IN (
        SELECT id FROM ${t('workflow_executions')}
         WHERE NOT (workflow_name = ANY($1::text[])) AND completed_at IS NOT NULL AND completed_at <= now() - ${ms('$2')}
           AND status IN ('completed', 'failed', 'cancelled', 'timed_out')
         LIMIT $3)`,
    lockKey: `nestjs-idempotency:retention:${schema}`,
  };
}
