import { INestApplication } from '@nestjs/common';
import Redis from 'ioredis';
import { TaskClient, WorkflowClient } from '../../lib';
import { ownRedis } from '../support/own-redis';
import { sql } from '../support/test-app';
import { ReceiptTasks } from '../task/fixtures/receipt.tasks';
import { OrderWorkflow } from './fixtures/order.workflow';
import { bootWorkflowApp, scenario } from './support';

jest.setTimeout(60_000); // real processes and servers; waits are bounded by the assertions' own timeouts

/** How long Redis stays paused: far longer than a start may wait for it (one second). */
const PAUSE_MS = 8_000;

// On a dedicated Redis (CLIENT PAUSE must not stall anyone else's suite).
describe('WorkflowClient.start and TaskClient.enqueue while Redis is paused', () => {
  const name = `wf-paused-${process.pid}`;
  const s = { ...scenario(), redisUrl: '' };
  let app: INestApplication;
  let client: WorkflowClient;
  let tasks: TaskClient;
  let probe: Redis;
  const redis = ownRedis(name, async () => {
    probe?.disconnect();
    await app?.close();
  });

  beforeAll(async () => {
    s.redisUrl = redis.url;
    ({ app, client } = await bootWorkflowApp(s, [OrderWorkflow, ReceiptTasks]));
    tasks = app.get(TaskClient);
    probe = new Redis(redis.url);
    // Every queue's connection is open before Redis pauses.
    await (await client.start(OrderWorkflow, { orderId: 'warm', steps: 1 }, { workflowId: 'warm' })).result({ timeout: '20s' });
    await (await tasks.enqueue(ReceiptTasks, 'sendReceipt', ['warm', 1], { taskId: 'receipt-warm' })).result({ timeout: '20s' });
  });

  it('both return their handle before Redis answers again (Postgres holds the execution); the jobs run once it does', async () => {
    await probe.call('CLIENT', 'PAUSE', String(PAUSE_MS), 'ALL');
    const pausedUntil = Date.now() + PAUSE_MS;
    const started = await client.start(OrderWorkflow, { orderId: 'paused', steps: 2 }, { workflowId: 'paused-order' });
    const enqueued = await tasks.enqueue(ReceiptTasks, 'sendReceipt', ['paused', 7], { taskId: 'receipt-paused' });
    // Before, start() waited for the pause to end (BullMQ's connection queues its commands until Redis answers).
    expect(Date.now()).toBeLessThan(pausedUntil);
    const stored = await sql<{ workflow_id: string; status: string }>(
      `SELECT workflow_id, status FROM "${s.schema}".workflow_executions WHERE workflow_id IN ('paused-order', 'receipt-paused') ORDER BY workflow_id`,
    );
    expect(stored.map((r) => r.workflow_id)).toEqual(['paused-order', 'receipt-paused']);
    expect(await started.result({ timeout: '40s' })).toEqual({ orderId: 'paused', results: expect.any(Array) as unknown });
    expect(await enqueued.result({ timeout: '40s' })).toEqual({ receiptId: 'rcpt-paused', amount: 7 });
    expect(Date.now()).toBeGreaterThanOrEqual(pausedUntil - 50);
    const [{ n }] = await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "${s.schema}".workflow_executions WHERE workflow_id IN ('paused-order', 'receipt-paused')`);
    expect(n).toBe(2);
  });
});
