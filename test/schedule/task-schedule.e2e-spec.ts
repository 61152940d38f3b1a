import { INestApplication } from '@nestjs/common';
import { IdempotencyConfigError, TaskClient } from '../../lib';
import { sql } from '../support/test-app';
import { bootWorkflowApp, scenario } from '../workflow/support';
import { DigestTasks, digestRuns, NotATaskSchedule } from './fixtures/digest.tasks';
import { until } from './support';

jest.setTimeout(60_000);

describe('@Scheduled() on a @Task() method, on a task queue with queues.<name> settings', () => {
  const s = scenario();
  let app: INestApplication;

  beforeAll(async () => {
    // A task queue is a known queue name: settings for it are accepted (an unknown name would fail the boot).
    ({ app } = await bootWorkflowApp(s, [DigestTasks], {}, { queues: { 'digest-tasks': { concurrency: 2, rateLimit: '50/s' } } }));
  });
  afterAll(async () => {
    await app.close();
  });

  it('enqueues each occurrence once as task <name>@<time ISO> with arguments [{ scheduledAt }]', async () => {
    const tasks = app.get(TaskClient);
    const done = await until('two completed occurrences', async () => {
      const rows = await sql<{ workflow_id: string; status: string; kind: string }>(
        `SELECT workflow_id, status, kind FROM "${s.schema}".workflow_executions WHERE workflow_name = 'digest' AND status = 'completed'`);
      return rows.length >= 2 ? rows : undefined;
    });
    for (const row of done) {
      expect(row.kind).toBe('task');
      const at = row.workflow_id.slice('digest@'.length);
      expect(row.workflow_id).toBe(`digest@${new Date(at).toISOString()}`);
      expect(await (await tasks.getTask<string>(row.workflow_id)).result({ timeout: '10s' })).toBe(at);
      expect(digestRuns.filter((r) => r === at)).toHaveLength(1);
    }
    const [stored] = await sql<{ kind: string; target: string }>(`SELECT kind, target FROM "${s.schema}".idempotency_schedules WHERE name = 'digest'`);
    expect(stored).toEqual({ kind: 'task', target: 'digest' });
  });
});

describe('@Scheduled() validation on methods', () => {
  it('a method that is not a @Task() fails at startup, naming it', async () => {
    const err = await bootWorkflowApp(scenario(), [NotATaskSchedule]).then(
      async ({ app }) => {
        await app.close();
        throw new Error('expected the app to fail at startup');
      },
      (e: Error) => e,
    );
    expect(err).toBeInstanceOf(IdempotencyConfigError);
    expect(err.message).toContain('@Scheduled() on NotATaskSchedule.tick: only a @Task() method (or a @Workflow() class) can be scheduled');
  });
});
