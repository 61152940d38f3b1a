import { INestApplication } from '@nestjs/common';
import { Step, Workflow, WorkflowClient, WorkflowConflictError } from '../../lib';
import { sql } from '../support/test-app';
import { bootWorkflowApp, scenario } from './support';

@Workflow({ name: 'cached-start' })
class CachedStartWorkflow {
  async run(input: { n: number }): Promise<number> {
    return this.square(input.n);
  }

  @Step()
  square(n: number): Promise<number> {
    return Promise.resolve(n * n);
  }
}

// SEMANTICS §2 line 20 with Redis as the fast path: Postgres stays the authority.
describe('workflow starts: Redis in front of Postgres', () => {
  const s = scenario();
  let app: INestApplication;
  let client: WorkflowClient;
  const executions = `"${s.schema}".workflow_executions`;

  beforeAll(async () => {
    ({ app, client } = await bootWorkflowApp(s, [CachedStartWorkflow]));
  }, 60_000);
  afterAll(() => app.close());

  it('answers a repeated start of a completed execution from Redis, without Postgres', async () => {
    const first = await client.start(CachedStartWorkflow, { n: 7 }, { workflowId: 'sq-7' });
    expect(await first.result({ timeout: '20s' })).toBe(49);
    const again = await client.start(CachedStartWorkflow, { n: 7 }, { workflowId: 'sq-7' }); // Postgres answers, Redis learns
    expect(again.executionId).toBe(first.executionId);
    await sql(`ALTER TABLE ${executions} RENAME TO workflow_executions_away`);
    try {
      const fromRedis = await client.start(CachedStartWorkflow, { n: 7 }, { workflowId: 'sq-7' });
      expect(fromRedis.executionId).toBe(first.executionId);
      expect(fromRedis.workflowId).toBe('sq-7');
      // Anything Redis does not hold still needs Postgres (which is away): it is never decided from the cache.
      await expect(client.start(CachedStartWorkflow, { n: 8 }, { workflowId: 'sq-8' })).rejects.toThrow();
    } finally {
      await sql(`ALTER TABLE "${s.schema}".workflow_executions_away RENAME TO workflow_executions`);
    }
  });

  it('still refuses the same id with another input (Postgres decides on a cache mismatch)', async () => {
    await expect(client.start(CachedStartWorkflow, { n: 9 }, { workflowId: 'sq-7' })).rejects.toBeInstanceOf(WorkflowConflictError);
  });
});
