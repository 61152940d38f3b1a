import { SetMetadata } from '@nestjs/common';
import { SCHEDULED_METADATA } from './schedule.constants';
import type { ScheduleOptions } from './schedule.interfaces';

/** What `@Scheduled()` stores on a class. */
export interface ScheduledMetadata {
  cron: string;
  options: ScheduleOptions;
}

/**
 * Runs a `@Workflow()` class, or a `@Task()` method, on a cron schedule (5 fields, or 6 with seconds first), through a
 * BullMQ job scheduler. Each occurrence starts the workflow (input `{ scheduledAt }`) or enqueues the task (arguments
 * `[{ scheduledAt }]`, ScheduledInput) with id `<name>@<scheduled time ISO>`, so any number of instances start it once. Missed occurrences after downtime follow `catchUp`
 * (default `'latest'`). Cron and time zone are validated at bootstrap. See README "Schedules".
 */
export function Scheduled(cron: string, options: ScheduleOptions = {}): ClassDecorator & MethodDecorator {
  return SetMetadata<string, ScheduledMetadata>(SCHEDULED_METADATA, { cron, options: { ...options } });
}
