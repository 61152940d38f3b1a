import { INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { IdempotencyModule, RetentionService } from '../../lib';
import { databaseUrl, sql, uniqueSchema } from '../support/test-app';

describe('retention of delivered outbox messages', () => {
  const schema = uniqueSchema('obret');
  let app: INestApplicationContext;

  beforeAll(async () => {
    @Module({
      imports: [IdempotencyModule.forRoot({
        postgres: { url: databaseUrl(), schema }, redis: false, migrationsRun: true,
        outbox: { topics: { evt: { to: 'handler' } }, relay: { enabled: false }, retention: '1h' },
        retention: { cleanupInterval: false, batchSize: 1000 },
      })],
    })
    class RetentionModule {}
    app = await NestFactory.createApplicationContext(RetentionModule, { logger: false });
  });
  afterAll(() => app.close());

  it('removes delivered messages older than outbox.retention in batches, and keeps recent, pending and dead ones', async () => {
    const insert = (count: number, status: string, deliveredAgo: string | null, prefix: string) =>
      sql(`INSERT INTO "${schema}".outbox_messages (id, topic, status, delivered_at, created_at)
           SELECT $1 || g, 'evt', $2, CASE WHEN $3::interval IS NULL THEN NULL ELSE now() - $3::interval END, now() - interval '3 hours'
           FROM generate_series(1, $4) g`, [prefix, status, deliveredAgo, count]);
    await insert(2500, 'delivered', '2 hours', 'old-');
    await insert(10, 'delivered', '10 minutes', 'recent-');
    await insert(5, 'pending', null, 'pending-');
    await insert(5, 'dead', null, 'dead-');

    const report = await app.get(RetentionService).cleanup();
    expect(report).toMatchObject({ outbox: 2500 });
    const left = await sql<{ status: string; n: number }>(`SELECT status, count(*)::int AS n FROM "${schema}".outbox_messages GROUP BY status ORDER BY status`);
    expect(left).toEqual([{ status: 'dead', n: 5 }, { status: 'delivered', n: 10 }, { status: 'pending', n: 5 }]);
    expect(await sql(`SELECT 1 FROM "${schema}".outbox_messages WHERE id LIKE 'old-%'`)).toEqual([]);
  });
});
