// In IdempotencyTestingModule, schedules are accepted but not run (no BullMQ, and a unit test's clock does not move on
// its own), and the `queues` settings have nothing to act on (steps run in process): neither may load bullmq or crash.
jest.mock('bullmq', () => {
  throw new Error('bullmq was loaded');
});

import { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { IdempotencyTestingModule, Scheduled, ScheduledInput, Step, Workflow, WorkflowClient } from '../../lib';

@Scheduled('0 3 * * *', { timezone: 'Europe/Paris', catchUp: 'all' })
@Workflow({ name: 'nightly', queue: 'nightly-runs' })
class NightlyWorkflow {
  async run(input: ScheduledInput): Promise<string> {
    return this.report(input.scheduledAt);
  }

  @Step({ queue: 'reports' })
  report(scheduledAt: string): Promise<string> {
    return Promise.resolve(`report for ${scheduledAt}`);
  }
}

describe('IdempotencyTestingModule with schedules and queue settings', () => {
  let app: INestApplication;

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyTestingModule.forRoot({ queues: { reports: { rateLimit: '10/s', concurrency: 2, retention: '7d' } } })],
      providers: [NightlyWorkflow],
    }).compile();
    app = moduleRef.createNestApplication();
    app.useLogger(false);
    await app.init();
  });
  afterAll(async () => {
    await app.close();
  });

  it('boots; schedule() validates and answers without running anything', async () => {
    const client = app.get(WorkflowClient);
    const info = await client.schedule(NightlyWorkflow, '0 4 * * *', { name: 'nightly-late', catchUp: 'none' });
    expect(info).toEqual({ name: 'nightly-late', cron: '0 4 * * *', catchUp: 'none', nextAt: null, nextOccurrenceId: null });
    await expect(client.schedule(NightlyWorkflow, '0 4 * * *', { timezone: 'Nowhere/City' })).rejects.toThrow(/timezone/);
    expect(await client.unschedule('nightly-late')).toBe(false);
    expect(await client.list({ workflow: NightlyWorkflow })).toEqual([]);
  });

  it('an occurrence is started by hand with the id and input a schedule would give it', async () => {
    const client = app.get(WorkflowClient);
    const scheduledAt = '2026-01-01T02:00:00.000Z';
    const handle = await client.start(NightlyWorkflow, { scheduledAt }, { workflowId: `nightly@${scheduledAt}` });
    expect(await handle.result()).toBe(`report for ${scheduledAt}`);
  });
});
