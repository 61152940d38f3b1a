import type { Provider } from '@nestjs/common';
import { ScheduleMetadataAccessor } from './schedule-metadata.accessor';
import { ScheduleOrchestrator } from './schedule.orchestrator';
import { ScheduleRegistrar } from './schedule-registrar';
import { TaskSchedules } from './task-schedules';
import { WorkflowSchedules } from './workflow-schedules';

/** Schedules: the registrar (any kind), the workflow and task kinds with their `@Scheduled()` discovery, and the orchestrator. */
export const scheduleProviders: Provider[] = [ScheduleMetadataAccessor, ScheduleRegistrar, WorkflowSchedules, TaskSchedules, ScheduleOrchestrator];
