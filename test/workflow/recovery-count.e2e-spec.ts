import { INestApplication } from '@nestjs/common';
import Redis from 'ioredis';
import { WorkflowClient, WorkflowHandle } from '../../lib';
import { waitUntil } from '../support/resilience';
import { ownRedis } from '../support/own-redis';
import { sql } from '../support/test-app';
import { OrderWorkflow } from './fixtures/order.workflow';
import { Child, kill, spawnWorker } from './processes';
import { bootWorkflowApp, Scenario, scenario } from './support';

jest.setTimeout(90_000); // real processes and servers; waits are bounded by the assertions' own timeouts

// Issue 16 item 6: one incident (a Redis loss, a SIGKILL, or both at once) is one recovery attempt, so
// maxRecoveryAttempts: 1 survives it. Workers run in child processes with WF_MAX_RECOVERIES=1.
describe('recovery attempts: one incident counts once', () => {
  const name = `wf-recount-${process.pid}`;
  let s: Scenario;
  let app: INestApplication;
  let client: WorkflowClient;
  const children: Child[] = [];
  const redis = ownRedis(name, async () => {
    for (const child of children) await kill(child);
    await app?.close();
  });

  beforeAll(async () => {
    s = scenario({ redisUrl: redis.url });
    // The test process only starts and inspects; the children run the workflows and the reconciler.
    ({ app, client } = await bootWorkflowApp(s, [OrderWorkflow], { workers: false }));
  });

  async function worker(): Promise<Child> {
    const child = spawnWorker(s, { WF_MAX_RECOVERIES: '1' });
    children.push(child);
    await child.line('READY');
    return child;
  }

  const flushall = async () => {
    const probe = new Redis(redis.url);
    await probe.flushall();
    probe.disconnect();
  };

  const stepStarted = (workflowId: string, step: string) =>
    waitUntil(`${step} of ${workflowId} started`, async () => {
      const rows = await sql(`SELECT 1 FROM "${s.schema}".step_runs WHERE workflow_id = $1 AND step = $2 AND phase = 'start'`, [workflowId, step]);
      return rows.length > 0;
    }, { timeoutMs: 30_000 });

  async function expectOneRecovery(handle: WorkflowHandle<{ results: string[] }>): Promise<void> {
    const result = await handle.result({ timeout: '60s' });
    expect(result.results).toHaveLength(2);
    const execution = await handle.execution();
    expect([execution.status, execution.recoveryAttempts]).toEqual(['completed', 1]);
  }

  it('FLUSHALL while a worker runs a step: one recovery, the workflow completes under maxRecoveryAttempts 1', async () => {
    const child = await worker();
    const handle = await client.start(OrderWorkflow, { orderId: 'flush-only', sleepMs: 2500, steps: 2 }, { workflowId: 'flush-only' });
    await stepStarted('flush-only', 'work-0');
    await flushall();
    // The reconciler re-enqueues the execution whose job vanished; the replay it starts must not count again.
    await expectOneRecovery(handle);
    await kill(child);
  });

  it('SIGKILL and FLUSHALL together: still one recovery', async () => {
    const first = await worker();
    const handle = await client.start(OrderWorkflow, { orderId: 'kill-flush', sleepMs: 1500, steps: 2 }, { workflowId: 'kill-flush' });
    await stepStarted('kill-flush', 'work-0');
    await kill(first);
    await flushall();
    await worker();
    await expectOneRecovery(handle);
  });
});
