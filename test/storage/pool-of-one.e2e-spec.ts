import { Body, Controller, INestApplication, Post } from '@nestjs/common';
import request from 'supertest';
import { RetentionService } from '../../lib';
import { WorkflowReconciler } from '../../lib/workflow/workflow.reconciler';
import { createTestApp, databaseUrl, sql, uniqueSchema } from '../support/test-app';
import { OrderWorkflow } from '../workflow/fixtures/order.workflow';
import { bootWorkflowApp, scenario } from '../workflow/support';

@Controller()
class PayController {
  @Post('pay')
  pay(@Body() body: { amount: number }) {
    return { amount: body.amount };
  }
}

// postgres.poolSize: 1 — a background pass must never hold the only connection while it waits for another.
describe('a pool of one Postgres connection', () => {
  it('retention passes and keyed requests interleave without a hang', async () => {
    const schema = uniqueSchema('one');
    const app = await createTestApp({
      adapter: 'express',
      controllers: [PayController],
      schema,
      options: { redis: false, postgres: { url: databaseUrl(), schema, poolSize: 1 }, retention: { cleanupInterval: false } },
    });
    try {
      const retention = app.get(RetentionService);
      const pay = (i: number) => request(app.getHttpServer()).post('/pay').set('Idempotency-Key', `one-${i}`).send({ amount: i });
      const [first, second, ...responses] = await Promise.all([retention.cleanup(), retention.cleanup(), ...[0, 1, 2, 3, 4].map(pay)]);
      expect(first !== null || second !== null).toBe(true);
      expect(responses.map((r) => r.status)).toEqual([201, 201, 201, 201, 201]);
      expect((await pay(0)).headers['idempotent-replayed']).toBe('true');
      expect(await retention.cleanup()).not.toBeNull();
    } finally {
      await app.close();
      await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    }
  });

  it('the workflow reconciler passes and a workflow runs to completion', async () => {
    const s = scenario();
    let app: INestApplication | undefined;
    try {
      const booted = await bootWorkflowApp(s, [OrderWorkflow], {}, {
        postgres: { url: s.databaseUrl, schema: s.schema, poolSize: 1 },
        retention: { cleanupInterval: false },
      });
      app = booted.app;
      const handle = await booted.client.start(OrderWorkflow, { orderId: 'o-1' }, { workflowId: 'pool-one' });
      expect(await app.get(WorkflowReconciler).reconcile()).toBe(0);
      expect((await handle.result()).results).toHaveLength(3);
    } finally {
      await app?.close();
      await sql(`DROP SCHEMA IF EXISTS "${s.schema}" CASCADE`);
    }
  });
});
