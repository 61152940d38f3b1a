import { Body, Controller, INestApplication, Injectable, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Client } from 'pg';
import request from 'supertest';
import {
  IdempotencyConfigError, IdempotencyModule, IdempotencyModuleOptions, IdempotencyService, Idempotent, IdempotentMethod, InboxService, RetentionService,
} from '../../lib';
import { retentionSql } from '../../lib/retention/retention.sql';
import { idempotencySql } from '../../lib/storage/postgres/idempotency.sql';
import { databaseUrl, sql, uniqueSchema } from '../support/test-app';

let handlerRuns = 0;
@Controller()
class OrdersController {
  @Post('orders')
  @Idempotent({ ttl: '1h' })
  create(@Body() body: { n: number }) {
    handlerRuns++;
    return { run: handlerRuns, n: body.n };
  }
}

let methodRuns = 0;
@Injectable()
class Billing {
  @IdempotentMethod({ ttl: '1h' })
  async bill(_id: string): Promise<number> {
    methodRuns++;
    return Promise.resolve(methodRuns);
  }
}

async function boot(schema: string, retention: IdempotencyModuleOptions['retention'] = {}): Promise<INestApplication> {
  @Module({
    imports: [IdempotencyModule.forRoot({ postgres: { url: databaseUrl(), schema }, redis: false, migrationsRun: true, retention })],
    controllers: [OrdersController],
    providers: [Billing],
  })
  class RetentionTestModule {}
  const app = await NestFactory.create(RetentionTestModule, { logger: false, abortOnError: false });
  await app.init();
  return app;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('retention cleanup', () => {
  const schema = uniqueSchema('ret');
  let app: INestApplication;
  let retention: RetentionService;
  const table = `"${schema}".idempotency_records`;

  beforeAll(async () => {
    app = await boot(schema, { default: '1h', inbox: '1h', cleanupInterval: false, batchSize: 5000 });
    retention = app.get(RetentionService);
  });
  afterAll(() => app.close());

  it('removes exactly the expired records of 200,000, keeps 1,000 live ones, while claims keep working', async () => {
    await sql(`
      INSERT INTO ${table} (scope, key, fingerprint, status, expires_at, completed_at, result)
      SELECT 'bulk', 'expired-' || g, 'f', 'completed', now() - interval '1 minute', now() - interval '2 minutes', '{}'::jsonb
        FROM generate_series(1, 200000) g;
      INSERT INTO ${table} (scope, key, fingerprint, status, expires_at, completed_at, result)
      SELECT 'bulk', 'live-' || g, 'f', 'completed', now() + interval '1 day', now(), '{}'::jsonb
        FROM generate_series(1, 1000) g;
      ANALYZE ${table};`);
    const engine = app.get(IdempotencyService);
    let claims = 0;
    let claimErrors = 0;
    let cleaning = true;
    const claimLoop = (async () => {
      while (cleaning) {
        try {
          const begun = await engine.begin({ scope: 'during', key: `k-${claims}`, fingerprint: 'f', leaseMs: 10_000, ttlMs: 60_000 });
          if (begun.kind === 'acquired') await engine.complete(begun.claim, { ok: true });
          else claimErrors++;
          claims++;
        } catch {
          claimErrors++;
        }
      }
    })();
    const report = await retention.cleanup();
    cleaning = false;
    await claimLoop;
    expect(report?.records).toBe(200000);
    const left = await sql<{ expired: string; live: string }>(
      `SELECT count(*) FILTER (WHERE key LIKE 'expired-%') AS expired, count(*) FILTER (WHERE key LIKE 'live-%') AS live FROM ${table} WHERE scope = 'bulk'`,
    );
    expect(left[0]).toEqual({ expired: '0', live: '1000' });
    expect(claims).toBeGreaterThan(0);
    expect(claimErrors).toBe(0);
  }, 120_000);

  it('finds the rows to delete through the expires_at index when most rows are live', async () => {
    await sql(`
      INSERT INTO ${table} (scope, key, fingerprint, status, expires_at, completed_at, result)
      SELECT 'plan', 'live-' || g, 'f', 'completed', now() + interval '1 day', now(), '{}'::jsonb FROM generate_series(1, 50000) g;
      INSERT INTO ${table} (scope, key, fingerprint, status, expires_at, completed_at, result)
      SELECT 'plan', 'old-' || g, 'f', 'completed', now() - interval '1 minute', now(), '{}'::jsonb FROM generate_series(1, 100) g;
      ANALYZE ${table};`);
    // The statement cleanup runs, with its parameters spelled out (Postgres 15 cannot EXPLAIN a generic plan).
    const statement = retentionSql(schema).records.replace(/\$1/g, '3600000').replace(/\$2/g, '1000');
    const plan = await sql<{ 'QUERY PLAN': string }>(`EXPLAIN ${statement}`);
    expect(plan.map((r) => r['QUERY PLAN']).join('\n')).toMatch(/idempotency_records_expires_at/);
  });

  it('does not delete an expired record that a claim is taking over right now', async () => {
    await sql(`INSERT INTO ${table} (scope, key, fingerprint, status, expires_at, completed_at, result)
               VALUES ('svc', 'taken-over', 'f', 'completed', now() - interval '1 minute', now() - interval '2 minutes', '{}')`);
    const claimer = new Client({ connectionString: databaseUrl() });
    await claimer.connect();
    try {
      await claimer.query('BEGIN');
      const { rows } = await claimer.query(idempotencySql(schema).claim.text, ['svc', 'taken-over', 'f', '00000000-0000-4000-8000-000000000002', 30_000, 60_000]);
      expect(rows).toEqual([expect.objectContaining({ outcome: 'acquired' })]);
      await retention.cleanup(); // runs while the claim holds the row
      await claimer.query('COMMIT');
    } finally {
      await claimer.end();
    }
    expect(await sql(`SELECT status FROM ${table} WHERE key = 'taken-over'`)).toEqual([{ status: 'in_progress' }]);
  });

  it('never removes an unfinished record, and keeps released ones for retention.default', async () => {
    await sql(`
      INSERT INTO ${table} (scope, key, fingerprint, status, lease_token, locked_until, expires_at)
        VALUES ('keep', 'live-lease', 'f', 'in_progress', gen_random_uuid(), now() + interval '1 minute', now() - interval '1 minute'),
               ('keep', 'dead-lease', 'f', 'in_progress', gen_random_uuid(), now() - interval '1 minute', now() - interval '1 minute');
      INSERT INTO ${table} (scope, key, fingerprint, status, expires_at, completed_at)
        VALUES ('keep', 'failed-recent', 'f', 'failed', now() - interval '1 minute', now() - interval '10 minutes'),
               ('keep', 'failed-old', 'f', 'failed', now() - interval '1 minute', now() - interval '2 hours');`);
    await retention.cleanup();
    const keys = (await sql<{ key: string }>(`SELECT key FROM ${table} WHERE scope = 'keep' ORDER BY key`)).map((r) => r.key);
    expect(keys).toEqual(['failed-recent', 'live-lease']);
  });

  it('lets an HTTP key and a method key be used again after cleanup', async () => {
    const [{ last }] = await sql<{ last: string }>(`SELECT coalesce(max(id), 0)::text AS last FROM ${table}`);
    const first = await request(app.getHttpServer()).post('/orders').set('Idempotency-Key', 'reuse-me').send({ n: 1 });
    const replay = await request(app.getHttpServer()).post('/orders').set('Idempotency-Key', 'reuse-me').send({ n: 1 });
    expect(replay.text).toBe(first.text);
    const billing = app.get(Billing);
    const billed = await billing.bill('b-1');
    expect(await billing.bill('b-1')).toBe(billed);
    // Their TTL (1h, so the replays above cannot miss it) runs out: both records, and only them, expire now.
    const expired = await sql(`UPDATE ${table} SET expires_at = now() - interval '1 second' WHERE id > $1 RETURNING id`, [last]);
    expect(expired).toHaveLength(2);
    const report = await retention.cleanup();
    expect(report?.records).toBeGreaterThanOrEqual(2);
    expect(await sql(`SELECT key FROM ${table} WHERE key = 'reuse-me'`)).toEqual([]);
    const again = await request(app.getHttpServer()).post('/orders').set('Idempotency-Key', 'reuse-me').send({ n: 2 });
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(JSON.parse(again.text)).toEqual({ run: handlerRuns, n: 2 });
    expect(await billing.bill('b-1')).toBe(billed + 1);
  });

  it('removes inbox ids older than retention.inbox, after which a redelivery runs again', async () => {
    const inbox = app.get(InboxService);
    await inbox.process('old-evt', 'c', () => Promise.resolve());
    await inbox.process('new-evt', 'c', () => Promise.resolve());
    await sql(`UPDATE "${schema}".inbox_messages SET processed_at = now() - interval '2 hours' WHERE message_id = 'old-evt'`);
    const report = await retention.cleanup();
    expect(report?.inbox).toBe(1);
    expect((await inbox.process('old-evt', 'c', () => Promise.resolve())).status).toBe('processed');
    expect((await inbox.process('new-evt', 'c', () => Promise.resolve())).status).toBe('duplicate');
  });

  it('runs on one instance at a time: a live lease of another instance skips the pass, a dead holder\'s lease is taken over', async () => {
    const locks = `"${schema}".idempotency_locks`;
    const name = `nestjs-idempotency:retention:${schema}`;
    await sql(`INSERT INTO ${locks} (name, holder, locked_until) VALUES ($1, gen_random_uuid(), now() + interval '1 minute')`, [name]);
    expect(await retention.cleanup()).toBeNull();
    await sql(`UPDATE ${locks} SET locked_until = now() - interval '1 second' WHERE name = $1`, [name]);
    expect(await retention.cleanup()).not.toBeNull();
    expect(await sql(`SELECT name FROM ${locks}`)).toEqual([]); // returned after the pass
  });
});

describe('retention defaults and options', () => {
  it('keeps inbox ids forever by default and runs in the background on its interval', async () => {
    const schema = uniqueSchema('ret');
    const app = await boot(schema, { cleanupInterval: '200ms' });
    try {
      const inbox = app.get(InboxService);
      await inbox.process('ancient', 'c', () => Promise.resolve());
      await sql(`UPDATE "${schema}".inbox_messages SET processed_at = now() - interval '3650 days'`);
      await sql(`INSERT INTO "${schema}".idempotency_records (scope, key, fingerprint, status, expires_at, completed_at)
                 VALUES ('bg', 'gone', 'f', 'completed', now() - interval '1 minute', now())`);
      const deadline = Date.now() + 10_000;
      while ((await sql(`SELECT 1 FROM "${schema}".idempotency_records WHERE key = 'gone'`)).length > 0 && Date.now() < deadline) await sleep(100);
      expect(await sql(`SELECT 1 FROM "${schema}".idempotency_records WHERE key = 'gone'`)).toEqual([]);
      expect(await sql(`SELECT message_id FROM "${schema}".inbox_messages`)).toEqual([{ message_id: 'ancient' }]);
    } finally {
      await app.close();
    }
  });

  it('rejects bad retention options at startup, naming them', async () => {
    await expect(boot(uniqueSchema('ret'), { workflows: 'a month', queues: { payments: '-1' }, batchSize: 0 })).rejects.toThrow(IdempotencyConfigError);
    await expect(boot(uniqueSchema('ret'), { workflows: 'a month' })).rejects.toThrow(/retention\.workflows: "a month" is not a duration/);
    await expect(boot(uniqueSchema('ret'), { queues: { payments: 'x' } })).rejects.toThrow(/retention\.queues\.payments/);
  });
});
