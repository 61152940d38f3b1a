import { Controller, Get, NotFoundException } from '@nestjs/common';
import { ScheduleInfo, WorkflowClient } from '../../lib';

/** The reconciliation's schedule: its cron and the workflow id of its next occurrence. */
@Controller('reconciliations')
export class ReconciliationController {
  constructor(private readonly workflows: WorkflowClient) {}

  @Get('schedule')
  async schedule(): Promise<ScheduleInfo> {
    const info = await this.workflows.getSchedule('daily-reconciliation');
    if (!info) throw new NotFoundException('the daily reconciliation is not scheduled');
    return info;
  }
}
