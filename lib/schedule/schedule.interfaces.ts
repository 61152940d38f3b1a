/**
 * What happens to occurrences missed while no instance ran the schedule: `'none'` skips them, `'latest'` (default)
 * runs only the most recent one, `'all'` runs each of them (at most the newest 100).
 */
export type CatchUp = 'none' | 'latest' | 'all';

/** Options of `@Scheduled(cron, options)`. */
export interface ScheduleOptions {
  /** IANA time zone the cron expression is read in, e.g. `"Europe/Paris"`. Default: UTC. */
  timezone?: string;
  /** Missed occurrences after downtime; default `'latest'`. */
  catchUp?: CatchUp;
}

/** Options of `WorkflowClient.schedule(workflow, cron, options)`. */
export interface ScheduleWorkflowOptions extends ScheduleOptions {
  /** The schedule's name, the first part of each occurrence's workflow id. Default: the workflow's name. */
  name?: string;
}

/** The input a scheduled workflow's `run()` receives: the occurrence's scheduled time (ISO 8601, UTC). */
export interface ScheduledInput {
  scheduledAt: string;
}

/** A schedule as stored, with its next occurrence. */
export interface ScheduleInfo {
  name: string;
  cron: string;
  timezone?: string;
  catchUp: CatchUp;
  /** The next occurrence's time (ISO 8601), and the workflow id it will run with (`<name>@<time>`); null in IdempotencyTestingModule, which runs no schedules. */
  nextAt: string | null;
  nextOccurrenceId: string | null;
}

/** @internal A schedule of any kind: `kind` names the starter (e.g. `'workflow'`), `target` what it starts. */
export interface ScheduleDefinition {
  name: string;
  kind: string;
  target: string;
  cron: string;
  timezone?: string;
  catchUp: CatchUp;
  source: 'decorator' | 'runtime';
}

/**
 * Starts one occurrence of a schedule of some kind: `occurrenceId` is `<name>@<scheduled time ISO>`, the identity
 * that makes a second start of the same occurrence a no-op. Registered per kind with `ScheduleRegistrar.addKind`.
 */
export type OccurrenceStarter = (target: string, occurrenceId: string, scheduledAt: Date) => Promise<void>;
