// Issue 14: IdempotencyHealthIndicator under @nestjs/terminus: healthy; Redis unreachable → still up but degraded
// (requests are served from Postgres alone); Postgres unreachable → down (503); a schema lacking a migration → down.
import { Controller, Get, INestApplication } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { IdempotencyHealthIndicator, IdempotencyModule, IDEMPOTENCY_MIGRATIONS_TABLE, Step, Workflow } from '../../lib';
import { listen } from '../support/resilience';
import { databaseUrl, redisUrl, sql, uniqueSchema } from '../support/test-app';
import { closedPort } from '../observability/support';
import { TcpProxy } from '../workflow/tcp-proxy';
import { FAST, uniquePrefix } from '../workflow/support';

jest.setTimeout(60_000);

@Controller()
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly idempotency: IdempotencyHealthIndicator,
  ) {}

  @Get('health')
  @HealthCheck()
  check() {
    // Generous: through a TCP proxy on a loaded machine a healthy check can take over a second; the unreachable
    // cases below fail at once (connection refused, Redis's offline queue off), not by this timeout.
    return this.health.check([() => this.idempotency.isHealthy('idempotency', { timeoutMs: 10_000 })]);
  }
}

@Workflow({ name: 'noop' })
class NoopWorkflow {
  run(): Promise<number> {
    return this.one();
  }

  @Step()
  one(): Promise<number> {
    return Promise.resolve(1);
  }
}

/** An app with the health endpoint; Postgres and Redis reached through the given URLs. */
async function bootApp(schema: string, postgresUrl: string, redis: string, withWorkflows: boolean): Promise<{ app: INestApplication; url: string }> {
  const moduleRef = await Test.createTestingModule({
    imports: [
      TerminusModule.forRoot({ logger: false }),
      IdempotencyModule.forRoot({
        postgres: { url: postgresUrl, schema },
        redis: { url: redis, keyPrefix: `idem-${schema}` },
        migrationsRun: true,
        workflows: { ...FAST, queuePrefix: uniquePrefix() },
      }),
    ],
    controllers: [HealthController],
    providers: withWorkflows ? [NoopWorkflow] : [],
  }).compile();
  const app = moduleRef.createNestApplication();
  app.useLogger(false);
  return { app, url: await listen(app) };
}

describe('IdempotencyHealthIndicator (terminus)', () => {
  const schema = uniqueSchema('health');
  const pgPort = Number(new URL(databaseUrl()).port);
  const redisPort = Number(new URL(redisUrl()).port);
  // Postgres goes through a proxy for the app with workflows; Redis for the app without (BullMQ's reconnect backoff
  // after an outage would make closing that app slow, and its workers are not what the Redis case is about).
  const pgProxy = new TcpProxy(pgPort);
  const redisProxy = new TcpProxy(redisPort);
  let withWorkers: { app: INestApplication; url: string };
  let cacheOnly: { app: INestApplication; url: string };

  beforeAll(async () => {
    const pg = new URL(databaseUrl());
    pg.port = String(await pgProxy.listen());
    withWorkers = await bootApp(schema, pg.toString(), redisUrl(), true);
    cacheOnly = await bootApp(schema, databaseUrl(), `redis://127.0.0.1:${await redisProxy.listen()}`, false);
  });

  afterAll(async () => {
    pgProxy.retarget(pgPort);
    redisProxy.retarget(redisPort);
    await withWorkers?.app.close();
    await cacheOnly?.app.close();
    await pgProxy.close();
    await redisProxy.close();
    await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });

  it('is up when Postgres, the schema, Redis and the workers are', async () => {
    const res = await request(withWorkers.url).get('/health');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      status: 'ok',
      details: { idempotency: { status: 'up', postgres: 'up', schema: 'current', redis: 'up', workers: 'alive', degraded: false } },
    });
    expect((await request(cacheOnly.url).get('/health')).body.details.idempotency).toMatchObject({ status: 'up', workers: 'none' });
  });

  it('stays up but degraded while Redis is unreachable (Postgres serves alone)', async () => {
    redisProxy.retarget(await closedPort());
    try {
      const res = await request(cacheOnly.url).get('/health');
      expect(res.status).toBe(200);
      expect(res.body.details.idempotency).toMatchObject({ status: 'up', redis: 'bypassed', degraded: true, postgres: 'up' });
    } finally {
      redisProxy.retarget(redisPort);
    }
  });

  it('is down (503) while Postgres is unreachable', async () => {
    pgProxy.retarget(await closedPort());
    try {
      const res = await request(withWorkers.url).get('/health');
      expect(res.status).toBe(503);
      expect(res.body.status).toBe('error');
      expect(res.body.details.idempotency).toMatchObject({ status: 'down', postgres: 'down', schema: 'unknown' });
    } finally {
      pgProxy.retarget(pgPort);
    }
  });

  it('is down when the schema lacks one of the library\'s migrations', async () => {
    const [last] = await sql<{ name: string }>(`DELETE FROM "${schema}"."${IDEMPOTENCY_MIGRATIONS_TABLE}" WHERE id = (SELECT max(id) FROM "${schema}"."${IDEMPOTENCY_MIGRATIONS_TABLE}") RETURNING name`);
    const res = await request(withWorkers.url).get('/health');
    expect(res.status).toBe(503);
    expect(res.body.details.idempotency).toMatchObject({ status: 'down', postgres: 'up', schema: 'behind', pending: [last.name] });
  });
});
