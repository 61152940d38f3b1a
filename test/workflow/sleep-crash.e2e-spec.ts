import { INestApplication } from '@nestjs/common';
import Redis from 'ioredis';
import { WorkflowClient } from '../../lib';
import { makeSleepDue } from '../support/make-sleep-due';
import { waitUntil } from '../support/resilience';
import { ownRedis } from '../support/own-redis';
import { sql } from '../support/test-app';
import { InboxWorkflow, SleepyWorkflow, WAIT_WORKFLOWS } from './fixtures/waits.workflows';
import { Child, kill, spawnWorker } from './processes';
import { bootWorkflowApp, Scenario, scenario } from './support';

jest.setTimeout(60_000); // real processes and servers; waits are bounded by the assertions' own timeouts

const suspended = (s: Scenario, workflowId: string) => async () => {
  const rows = await sql<{ wake_at: Date }>(
    `SELECT w.wake_at FROM "${s.schema}".workflow_executions x JOIN "${s.schema}".workflow_waits w ON w.execution_id = x.id
      WHERE x.workflow_id = $1 AND x.status = 'pending' AND x.suspended_until IS NOT NULL`,
    [workflowId],
  );
  return rows[0]?.wake_at;
};

const runs = (s: Scenario, workflowId: string) =>
  sql<{ step: string; n: number }>(`SELECT step, count(*)::int AS n FROM "${s.schema}".step_runs WHERE workflow_id = $1 GROUP BY step ORDER BY step`, [workflowId]);

const HOUR = 3_600_000;

// Issue 11: a sleep survives a SIGKILLed worker and a Redis FLUSHALL, and wakes at its stored time.
// The workflows sleep for an hour, so the crash or the flush surely happens while they sleep; the test then makes the
// sleep due (makeSleepDue: the run is woken now, its stored wake-up time is a second later) and checks the run waited
// for that stored time.
describe('sleep() across a crash and a Redis loss', () => {
  it('worker SIGKILLed during a sleep → completes after a restart, not before the stored wake-up time', async () => {
    const s = scenario();
    const { app, client } = await bootWorkflowApp(s, WAIT_WORKFLOWS, { workers: false });
    const children: Child[] = [];
    try {
      const first = spawnWorker(s);
      children.push(first);
      await first.line('READY');
      const handle = await client.start(SleepyWorkflow, { ms: HOUR }, { workflowId: 'crash-sleep' });
      await waitUntil('the workflow sleeps', suspended(s, 'crash-sleep'));
      await kill(first);
      const second = spawnWorker(s);
      children.push(second);
      await second.line('READY');
      const wakeAt = await makeSleepDue(s.schema, 'crash-sleep', 1000);
      const { after } = await handle.result({ timeout: '40s' });
      expect(after).toBeGreaterThanOrEqual(wakeAt.getTime());
      expect(await runs(s, 'crash-sleep')).toEqual([{ step: 'after', n: 1 }, { step: 'before', n: 1 }]);
      // Sleeping is no crash: no recovery was counted for it.
      expect((await handle.execution()).recoveryAttempts).toBe(0);
    } finally {
      for (const child of children) await kill(child);
      await app.close();
    }
  });

  describe('on a dedicated Redis', () => {
    const name = `wf-sleep-flush-${process.pid}`;
    let app: INestApplication | undefined;
    const redis = ownRedis(name, () => app?.close());

    it('Redis FLUSHALL during the sleep → the reconciler re-adds the wake-up from Postgres; it still wakes, no recovery counted', async () => {
      const s = scenario({ redisUrl: redis.url });
      let client: WorkflowClient;
      ({ app, client } = await bootWorkflowApp(s, WAIT_WORKFLOWS));
      const handle = await client.start(SleepyWorkflow, { ms: HOUR }, { workflowId: 'flush-sleep' });
      await waitUntil('the workflow sleeps', suspended(s, 'flush-sleep'));
      const probe = new Redis(redis.url);
      try {
        await probe.flushall();
        // The reconciler re-adds the lost job from Postgres (still delayed: the sleep is not due yet).
        await waitUntil('the job is re-added', async () => (await probe.keys(`*:wf-${handle.executionId}`)).length > 0);
      } finally {
        probe.disconnect();
      }
      expect(await runs(s, 'flush-sleep')).toEqual([{ step: 'before', n: 1 }]);
      const wakeAt = await makeSleepDue(s.schema, 'flush-sleep', 1000);
      const { after } = await handle.result({ timeout: '40s' });
      expect(after).toBeGreaterThanOrEqual(wakeAt.getTime());
      expect(await runs(s, 'flush-sleep')).toEqual([{ step: 'after', n: 1 }, { step: 'before', n: 1 }]);
      expect((await handle.execution()).recoveryAttempts).toBe(0);
    });

    it('Redis FLUSHALL while a workflow waits in recv() → a later send() still reaches it', async () => {
      const s = scenario({ redisUrl: redis.url });
      const booted = await bootWorkflowApp(s, WAIT_WORKFLOWS);
      try {
        const handle = await booted.client.start(InboxWorkflow, { count: 1 }, { workflowId: 'flush-recv' });
        await waitUntil('the workflow waits', suspended(s, 'flush-recv'));
        const probe = new Redis(redis.url);
        await probe.flushall();
        probe.disconnect();
        await booted.client.send('flush-recv', 'after the flush');
        await expect(handle.result({ timeout: '40s' })).resolves.toEqual(['after the flush']);
      } finally {
        await booted.app.close();
      }
    });
  });
});
