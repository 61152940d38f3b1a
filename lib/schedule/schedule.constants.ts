/** Metadata key of `@Scheduled()`. */
export const SCHEDULED_METADATA = 'nestjs-idempotency:scheduled';

/** The BullMQ queue that holds the job schedulers of every schedule (under the workflows' queue prefix). */
export const SCHEDULES_QUEUE = 'idempotency-schedules';

/** `catchUp: 'all'` runs at most this many missed occurrences (the newest ones). */
export const CATCH_UP_ALL_LIMIT = 100;

/** The workflow id of an occurrence: the time-bucketed identity `<name>@<scheduled time ISO>`. */
export function occurrenceId(name: string, scheduledAtMs: number): string {
  return `${name}@${new Date(scheduledAtMs).toISOString()}`;
}
