import { BeforeApplicationShutdown, Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { ScheduleRegistrar } from './schedule-registrar';
import { TaskSchedules } from './task-schedules';
import { WorkflowSchedules } from './workflow-schedules';

/** Declares the decorators' schedules and starts the registrar at bootstrap; stops its worker before shutdown. */
@Injectable()
export class ScheduleOrchestrator implements OnApplicationBootstrap, BeforeApplicationShutdown {
  constructor(
    private readonly registrar: ScheduleRegistrar,
    private readonly workflowSchedules: WorkflowSchedules,
    private readonly taskSchedules: TaskSchedules,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    if (!this.workflowSchedules.enabled) return;
    this.workflowSchedules.declareAll();
    this.taskSchedules.declareAll();
    await this.registrar.start();
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.registrar.close();
  }
}
