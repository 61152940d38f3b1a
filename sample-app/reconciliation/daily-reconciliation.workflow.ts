import { Scheduled, ScheduledInput, Step, Workflow } from '../../lib';
import { ReconciliationRepository, ReconciliationSummary } from './reconciliation.repository';

/** When the reconciliation runs (cron, UTC); `RECONCILIATION_CRON` overrides it (e.g. every minute in a demo). */
export const RECONCILIATION_CRON = process.env.RECONCILIATION_CRON ?? '0 2 * * *';

/**
 * Once a day, totals the previous day's ledger. Scheduled by `@Scheduled()`: every instance runs the schedule, yet each
 * day's occurrence starts once (workflow id `daily-reconciliation@<time ISO>`); after downtime only the latest missed
 * day is reconciled (`catchUp: 'latest'`), since each run totals the day before its own scheduled time.
 */
@Scheduled(RECONCILIATION_CRON, { timezone: 'UTC', catchUp: 'latest' })
@Workflow({ name: 'daily-reconciliation', queue: 'reconciliation' })
export class DailyReconciliationWorkflow {
  constructor(private readonly reconciliations: ReconciliationRepository) {}

  async run(input: ScheduledInput): Promise<ReconciliationSummary> {
    const end = new Date(input.scheduledAt);
    const start = new Date(end.getTime() - 86_400_000);
    return this.reconcile(start.toISOString(), end.toISOString());
  }

  @Step({ queue: 'reconciliation-steps', attempts: 3, backoff: 1000 })
  async reconcile(from: string, to: string): Promise<ReconciliationSummary> {
    return this.reconciliations.summarize(from, to);
  }
}
