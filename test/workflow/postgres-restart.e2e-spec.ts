import { INestApplication } from '@nestjs/common';
import { WorkflowClient, WorkflowHandle } from '../../lib';
import { waitUntil } from '../support/resilience';
import { startPostgres, StartedPostgres, stopPostgres } from '../support/services';
import { OrderWorkflow } from './fixtures/order.workflow';
import { bootWorkflowApp, scenario } from './support';
import { TcpProxy } from './tcp-proxy';
import { Client } from 'pg';

jest.setTimeout(60_000); // real processes and servers; waits are bounded by the assertions' own timeouts

// SEMANTICS §2 line 29, on a dedicated Postgres restarted under the app. startPostgres picks a new port on each
// start, so the app talks to it through a local TCP forwarder whose address stays the same.
describe('Postgres restarted while workflows run', () => {
  const name = `wf-pgrestart-${process.pid}`;
  let pg: StartedPostgres | undefined;
  let proxy: TcpProxy;
  let app: INestApplication;
  let client: WorkflowClient;

  afterAll(async () => {
    await app?.close();
    await proxy?.close();
    await stopPostgres(pg, { removeData: true });
  });

  it('29: the checkpoint writes are retried and every workflow completes', async () => {
    pg = await startPostgres(name);
    proxy = new TcpProxy(Number(new URL(pg.url).port));
    const url = `postgres://postgres@127.0.0.1:${await proxy.listen()}/postgres`;
    const s = scenario({ databaseUrl: url });
    ({ app, client } = await bootWorkflowApp(s, [OrderWorkflow], { concurrency: 10 }));
    const count = async () => {
      const c = new Client({ connectionString: url });
      await c.connect();
      try {
        return (await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${s.schema}".workflow_steps`)).rows[0].n;
      } finally {
        await c.end();
      }
    };
    const handles: WorkflowHandle<{ results: string[] }>[] = [];
    for (let i = 0; i < 10; i++) handles.push(await client.start(OrderWorkflow, { orderId: `p${i}`, sleepMs: 100, steps: 5 }, { workflowId: `pg-${i}` }));
    await waitUntil('some steps checkpointed', async () => (await count()) >= 5);
    await stopPostgres(pg); // fast shutdown: every connection is cut, checkpoints in flight fail
    await new Promise((resolve) => setTimeout(resolve, 1000));
    pg = await startPostgres(name); // same data directory, new port
    proxy.retarget(Number(new URL(pg.url).port));
    const results = await Promise.all(handles.map((h) => h.result({ timeout: '90s' })));
    expect(results.map((r) => r.results.length)).toEqual(Array(10).fill(5));
    expect(await count()).toBe(50);
  }, 150_000);
});
