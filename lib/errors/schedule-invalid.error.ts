import { IdempotencyError } from './idempotency.error';

/** Raised by `WorkflowClient.schedule()` when the cron expression, time zone or options are invalid; each problem names the option. */
export class ScheduleInvalidError extends IdempotencyError {
  readonly code = 'SCHEDULE_INVALID';

  constructor(readonly schedule: string, readonly problems: string[]) {
    super(`schedule "${schedule}" is invalid: ${problems.join('; ')}`);
    this.name = 'ScheduleInvalidError';
  }
}
