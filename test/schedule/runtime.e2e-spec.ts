import { INestApplication } from '@nestjs/common';
import { IdempotencyConfigError, ScheduleInvalidError, WorkflowClient } from '../../lib';
import { sql } from '../support/test-app';
import { bootWorkflowApp, scenario } from '../workflow/support';
import { BrokenScheduleWorkflow, ReportWorkflow } from './fixtures/report.workflow';
import { until } from './support';

jest.setTimeout(60_000);

describe('WorkflowClient.schedule() at runtime', () => {
  const s = scenario();
  let app: INestApplication;
  let client: WorkflowClient;

  beforeAll(async () => {
    ({ app, client } = await bootWorkflowApp(s, [ReportWorkflow]));
  });
  afterAll(async () => {
    await app.close();
  });

  it('runs the occurrence it announced with id <name>@<time ISO> and input { scheduledAt }, until unscheduled', async () => {
    const info = await client.schedule(ReportWorkflow, '* * * * * *', { name: 'report-fast', catchUp: 'none' });
    expect(info).toMatchObject({ name: 'report-fast', cron: '* * * * * *', catchUp: 'none' });
    expect(info.nextOccurrenceId).toBe(`report-fast@${info.nextAt}`);
    const handle = await until('the announced occurrence', async () => (await client.list({ workflow: ReportWorkflow })).find((e) => e.workflowId === info.nextOccurrenceId));
    expect(await (await client.getHandle<string>(handle.workflowId)).result({ timeout: '30s' })).toBe(info.nextAt);
    const [stored] = await sql<{ source: string; target: string }>(`SELECT source, target FROM "${s.schema}".idempotency_schedules WHERE name = 'report-fast'`);
    expect(stored).toEqual({ source: 'runtime', target: 'report' });

    expect(await client.unschedule('report-fast')).toBe(true);
    expect(await client.unschedule('report-fast')).toBe(false);
    const removedAt = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 2500)); // two more seconds of a per-second cron
    const later = (await client.list({ workflow: ReportWorkflow })).filter((e) => Date.parse(e.workflowId.split('@')[1]) > removedAt + 1000);
    expect(later).toEqual([]);
  });

  it('refuses a bad cron, time zone or option with ScheduleInvalidError naming it', async () => {
    await expect(client.schedule(ReportWorkflow, 'every day')).rejects.toThrow(ScheduleInvalidError);
    await expect(client.schedule(ReportWorkflow, '0 3 * * *', { timezone: 'Mars/Olympus' })).rejects.toThrow(/timezone: "Mars\/Olympus" is not an IANA time zone/);
    await expect(client.schedule(ReportWorkflow, '0 3 * * *', { catchUp: 'some' as never })).rejects.toThrow(/catchUp: expected 'none', 'latest' or 'all'/);
  });
});

describe('@Scheduled() validation', () => {
  it('a bad cron or time zone fails at startup, naming the class and the option', async () => {
    const err = await bootWorkflowApp(scenario(), [BrokenScheduleWorkflow]).then(
      async ({ app }) => {
        await app.close();
        throw new Error('expected the app to fail at startup');
      },
      (e: Error) => e,
    );
    expect(err).toBeInstanceOf(IdempotencyConfigError);
    expect(err.message).toContain('@Scheduled() on BrokenScheduleWorkflow: timezone: "Mars/Olympus" is not an IANA time zone');
    expect(err.message).toContain('@Scheduled() on BrokenScheduleWorkflow: cron: "61 * * * *" is not a valid cron expression');
  });
});
