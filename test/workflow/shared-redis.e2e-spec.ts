import { INestApplication } from '@nestjs/common';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { WorkflowClient } from '../../lib';
import { sql } from '../support/test-app';
import { BillingWorkflow, ShippingWorkflow } from './fixtures/deploy.workflows';
import { OrderWorkflow } from './fixtures/order.workflow';
import { Child, kill, spawnWorker } from './processes';
import { bootWorkflowApp, scenario, Scenario } from './support';

jest.setTimeout(90_000);

const APP_PROCESS = join(__dirname, 'fixtures', 'app-process.ts');

/** A client-only app of the scenario with the default (derived) queue prefix. */
function bootClient(s: Scenario, providers: unknown[], app?: string): Promise<{ app: INestApplication; client: WorkflowClient }> {
  return bootWorkflowApp(s, providers as never, { workers: false, queuePrefix: undefined, ...(app ? { app } : {}) });
}

/** Every execution of the scenario finished `completed` without a recovery, and every step body ran exactly once. */
async function expectCleanRuns(s: Scenario, executions: number, steps: number): Promise<void> {
  const rows = await sql<{ status: string; recovery_attempts: number }>(`SELECT status, recovery_attempts FROM "${s.schema}".workflow_executions`);
  expect(rows).toHaveLength(executions);
  expect(rows.every((r) => r.status === 'completed' && r.recovery_attempts === 0)).toBe(true);
  const runs = await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "${s.schema}".step_runs WHERE phase = 'done' GROUP BY workflow_id, step`);
  expect(runs).toHaveLength(steps);
  expect(runs.every((r) => r.n === 1)).toBe(true);
}

// Issue 7 item 2: applications sharing one Redis never take each other's jobs; unknown jobs go back, uncounted.
describe('several applications on one Redis', () => {
  const children: Child[] = [];
  const apps: INestApplication[] = [];

  afterEach(async () => {
    for (const child of children.splice(0)) await kill(child, 'SIGTERM');
    for (const app of apps.splice(0)) await app.close();
  });

  it('two apps with different workflows, one Redis and one Postgres schema: each runs only its own, none recovered', async () => {
    const s = scenario();
    // "orders" runs under the default app name (package.json), "billing" under workflows.app.
    const orders = spawnWorker(s, { WF_WORKFLOWS: 'order' }, APP_PROCESS);
    const billing = spawnWorker(s, { WF_WORKFLOWS: 'billing', WF_APP: 'billing-service' }, APP_PROCESS);
    children.push(orders, billing);
    await Promise.all([orders.line('READY'), billing.line('READY')]);
    const a = await bootClient(s, [OrderWorkflow]);
    const b = await bootClient(s, [BillingWorkflow], 'billing-service');
    apps.push(a.app, b.app);

    const started = await Promise.all([
      ...Array.from({ length: 8 }, (_, i) => a.client.start(OrderWorkflow, { orderId: `o${i}`, steps: 2 }, { workflowId: `order-${i}` })),
      ...Array.from({ length: 8 }, (_, i) => b.client.start(BillingWorkflow, { invoice: `inv${i}` }, { workflowId: `billing-${i}` })),
    ]);
    const results = await Promise.all(started.map((h) => (h.result({ timeout: '60s' }) as Promise<unknown>)));
    expect(results.slice(8)).toEqual(Array.from({ length: 8 }, (_, i) => `inv${i}:${`inv${i}`.length * 100}`));
    await expectCleanRuns(s, 16, 8 * 2 + 8 * 2);
    expect([...orders.output, ...billing.output].join('\n')).not.toContain('not registered');
  });

  it('rolling deploy: a workflow only the new instance knows completes, handed back by the old one, not recovered', async () => {
    const s = scenario();
    const old = spawnWorker(s, { WF_WORKFLOWS: 'order' }, APP_PROCESS);
    children.push(old);
    await old.line('READY');
    const starter = await bootClient(s, [OrderWorkflow, ShippingWorkflow]);
    apps.push(starter.app);
    const handles = await Promise.all(Array.from({ length: 10 }, (_, i) => starter.client.start(ShippingWorkflow, { parcel: `p${i}` }, { workflowId: `ship-${i}` })));
    // Only the old instance is running: it takes the new workflow's jobs and must give them back.
    const handedBack = 'workflow "shipping" is not registered in this instance';
    for (const deadline = Date.now() + 30_000; !old.output.join('\n').includes(handedBack); await sleep(100)) {
      if (Date.now() > deadline) throw new Error(`the old instance never handed a job back; output:\n${old.output.join('\n')}`);
    }
    await sleep(500); // a few more hand-backs while the old instance is alone
    const fresh = spawnWorker(s, { WF_WORKFLOWS: 'order,shipping' }, APP_PROCESS);
    children.push(fresh);
    await fresh.line('READY');

    const results = await Promise.all(handles.map((h) => h.result({ timeout: '60s' })));
    expect(results).toEqual(Array.from({ length: 10 }, (_, i) => `label-p${i}:sent`));
    await expectCleanRuns(s, 10, 10 * 2);
  });
});
