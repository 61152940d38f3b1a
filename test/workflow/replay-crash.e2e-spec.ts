import { INestApplication } from '@nestjs/common';
import Redis from 'ioredis';
import { randomUUID } from 'node:crypto';
import { waitUntil } from '../support/resilience';
import { ownRedis } from '../support/own-redis';
import { sql } from '../support/test-app';
import { expectOwnKeys, finishKeys } from './branch-keys';
import { BranchesWorkflow, BranchProbe } from './fixtures/branches.workflow';
import { Child, kill, spawnWorker } from './processes';
import { bootWorkflowApp, scenario } from './support';

jest.setTimeout(60_000); // real processes and servers; waits are bounded by the assertions' own timeouts

// Issue 16 item 1: parallel branches keep their own results and step keys when another process replays them.
// On a dedicated Redis: FLUSHALL must not touch anyone else's data.
describe('parallel branches replayed by another process after SIGKILL', () => {
  const name = `wf-branches-${process.pid}`;
  const items = ['x0', 'x1', 'x2'];
  const children: Child[] = [];
  const apps: INestApplication[] = [];
  const redis = ownRedis(name, async () => {
    for (const child of children) await kill(child);
    for (const app of apps) await app.close();
  });

  async function crashMidFinishAndRecover(flush: boolean): Promise<void> {
    const s = scenario({ redisUrl: redis.url });
    const { app, client } = await bootWorkflowApp(s, [BranchesWorkflow, BranchProbe], { workers: false });
    apps.push(app);
    const first = spawnWorker(s);
    children.push(first);
    await first.line('READY');
    const id = `branches-${randomUUID().slice(0, 6)}`;
    const handle = await client.start(BranchesWorkflow, { items, holdFinish: true }, { workflowId: id });
    // Every finish call is running (its key handed out, its external effect possibly done), none checkpointed.
    await waitUntil('three finish calls running', async () => (await finishKeys(s.schema, id)).size === 3, { timeoutMs: 30_000 });
    await kill(first);
    if (flush) {
      const probe = new Redis(redis.url);
      await probe.flushall();
      probe.disconnect();
    }
    const second = spawnWorker(s);
    children.push(second);
    await second.line('READY');
    await sql(`INSERT INTO "${s.schema}".step_runs (workflow_id, step, phase, pid) VALUES ($1, 'release', 'done', 0)`, [id]);
    expect(await handle.result({ timeout: '60s' })).toEqual(['B(A(x0))', 'B(A(x1))', 'B(A(x2))']);
    const steps = await client.steps(handle.executionId);
    // The first run called finish in completion order (x2, x1, x0): positions 3, 4, 5.
    expect(steps.filter((c) => c.name === 'finish').map((c) => [c.position, c.result])).toEqual([[3, 'B(A(x2))'], [4, 'B(A(x1))'], [5, 'B(A(x0))']]);
    await expectOwnKeys(s.schema, id, handle.executionId, items, steps);
    await kill(second);
  }

  it('SIGKILL mid-step, recovery in another process: every call gets its own result and keeps its own step key', async () => {
    await crashMidFinishAndRecover(false);
  }, 120_000);

  it('SIGKILL mid-step plus Redis FLUSHALL: the reconciler replays; no step key is handed to another call', async () => {
    await crashMidFinishAndRecover(true);
  }, 120_000);
});
