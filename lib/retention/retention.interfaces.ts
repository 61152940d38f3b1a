import type { Duration } from '../utils/duration';

/** How long finished records are kept, and how cleanup runs. */
export interface RetentionOptions {
  /** Released (failed) HTTP and method-guard records are kept this long after they failed, for debugging. Completed ones follow their TTL. Default `"7d"`. */
  default?: Duration;
  /** Finished workflow executions (and their step checkpoints). Default `"30d"`; `"0"` removes them as soon as they finish. */
  workflows?: Duration;
  /** Finished task executions (`@Task()`); the task id can be enqueued again once they are removed. Default `"7d"`. */
  tasks?: Duration;
  /** Per-queue retention of workflow executions, e.g. `{ payments: "30d", ephemeral: "0" }`; `@Workflow({ retention })` overrides it. */
  queues?: Record<string, Duration>;
  /** Seen inbox message ids. Default `false`: kept forever, so a very late redelivery is still caught. */
  inbox?: Duration | false;
  /** How often the background cleanup runs (on one instance at a time). Default `"1h"`; `false` turns it off. */
  cleanupInterval?: Duration | false;
  /** Rows deleted per statement; each batch is its own short transaction. Default 1000. */
  batchSize?: number;
}

/** Retention after validation (internal). */
export interface ResolvedRetentionOptions {
  releasedMs: number;
  workflowsMs: number;
  tasksMs: number;
  queuesMs: Record<string, number>;
  inboxMs: number | null;
  intervalMs: number | null;
  batchSize: number;
}

/** Rows one cleanup pass removed. */
export interface CleanupReport {
  records: number;
  inbox: number;
  workflows: number;
  /** Delivered outbox messages removed (present when the `outbox` option is set; see `outbox.retention`). */
  outbox?: number;
}
