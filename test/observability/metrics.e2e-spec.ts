// Issue 14: metrics through the OpenTelemetry API, exported to Prometheus as the README recipe does, scraped over
// HTTP: claims by face and outcome, takeovers, releases, lost completions, the Redis cache and breaker, store
// latency, workflow starts, completions, step attempts and durations, and the outbox gauges.
import { Body, Controller, INestApplication, Injectable, Post } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import {
  Idempotent, IdempotencyModule, IdempotencyService, IdempotentMethod, InboxService, OutboxService, Step, Task, TaskClient, TaskConflictError,
  Workflow, WorkflowClient, WorkflowConflictError,
} from '../../lib';
import { IdempotencyConnections } from '../../lib/storage/idempotency-connections';
import { listen, waitUntil } from '../support/resilience';
import { databaseUrl, redisUrl, sql, uniqueSchema } from '../support/test-app';
import { TcpProxy } from '../workflow/tcp-proxy';
import { FAST, uniquePrefix } from '../workflow/support';
import { closedPort, sample, startPrometheus } from './support';

jest.setTimeout(60_000);

let gate: Promise<void> = Promise.resolve();

@Controller()
class PayController {
  @Post('charge')
  charge(@Body() body: { amount: number }) {
    return { charged: body.amount };
  }

  @Post('charge-tx')
  @Idempotent({ transaction: true })
  chargeInTransaction(@Body() body: { amount: number }) {
    return { charged: body.amount };
  }

  @Post('slow')
  async slow() {
    await gate;
    return { done: true };
  }
}

@Injectable()
class Billing {
  @IdempotentMethod({ key: (id: string) => id })
  invoice(id: string, fail: boolean): string {
    if (fail) throw new Error('card declined');
    return `invoice ${id}`;
  }
}

let flaky = 0;

@Workflow({ name: 'metered' })
class MeteredWorkflow {
  async run(input: { n: number }): Promise<number> {
    return this.double(input.n);
  }

  @Step({ attempts: 3, backoff: 20 })
  double(n: number): Promise<number> {
    if (flaky++ === 0) return Promise.reject(new Error('first attempt fails'));
    return Promise.resolve(n * 2);
  }
}

@Injectable()
class Mailer {
  @Task({ name: 'metered-mail' })
  send(to: string): Promise<string> {
    return Promise.resolve(`sent to ${to}`);
  }
}

describe('metrics (OpenTelemetry → Prometheus exporter)', () => {
  const schema = uniqueSchema('obs');
  let prometheus: Awaited<ReturnType<typeof startPrometheus>>;
  let proxy: TcpProxy;
  let app: INestApplication;
  let url: string;
  const pgPort = Number(new URL(databaseUrl()).port);

  beforeAll(async () => {
    prometheus = await startPrometheus();
    proxy = new TcpProxy(pgPort);
    const proxied = new URL(databaseUrl());
    proxied.port = String(await proxy.listen());
    const moduleRef = await Test.createTestingModule({
      imports: [
        IdempotencyModule.forRoot({
          postgres: { url: proxied.toString(), schema },
          redis: { url: redisUrl(), keyPrefix: `idem-${schema}` },
          migrationsRun: true,
          workflows: { ...FAST, queuePrefix: uniquePrefix() },
          outbox: { topics: { 'order.created': { to: 'handler' } }, relay: { enabled: false } },
        }),
      ],
      controllers: [PayController],
      providers: [Billing, MeteredWorkflow, Mailer],
    }).compile();
    app = moduleRef.createNestApplication();
    app.useLogger(false);
    url = await listen(app);
  });

  afterAll(async () => {
    await app?.close();
    await proxy?.close();
    await prometheus?.stop();
    await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });

  const claims = async (face: string, outcome: string) => sample(await prometheus.scrape(), 'idempotency_claims_total', { face, outcome }) ?? 0;

  it('counts HTTP claims by outcome: acquired, replay, mismatch, in_progress, store_unavailable', async () => {
    const post = (path: string, key: string, body: object) => request(url).post(path).set('Idempotency-Key', key).send(body);
    expect((await post('/charge', 'k1', { amount: 1 })).status).toBe(201);
    expect((await post('/charge', 'k1', { amount: 1 })).headers['idempotent-replayed']).toBe('true');
    expect((await post('/charge', 'k1', { amount: 2 })).status).toBe(422);
    let open!: () => void;
    gate = new Promise((resolve) => (open = resolve));
    const first = post('/slow', 'k2', {}).then((r) => r);
    await waitUntil('the first request holds k2', async () => (await claims('http', 'acquired')) >= 2);
    expect((await post('/slow', 'k2', {})).status).toBe(409);
    open();
    expect((await first).status).toBe(201);

    proxy.retarget(await closedPort()); // Postgres unreachable: the claim fails closed
    try {
      expect((await post('/charge', 'k3', { amount: 3 })).status).toBe(503);
    } finally {
      proxy.retarget(pgPort);
    }

    const text = await prometheus.scrape();
    expect(sample(text, 'idempotency_claims_total', { face: 'http', outcome: 'acquired' })).toBe(2);
    expect(sample(text, 'idempotency_claims_total', { face: 'http', outcome: 'replay' })).toBe(1);
    expect(sample(text, 'idempotency_claims_total', { face: 'http', outcome: 'mismatch' })).toBe(1);
    expect(sample(text, 'idempotency_claims_total', { face: 'http', outcome: 'in_progress' })).toBe(1);
    expect(sample(text, 'idempotency_claims_total', { face: 'http', outcome: 'store_unavailable' })).toBe(1);
    // Redis answered the replay; every lookup is counted, so the ratio is hits over lookups.
    expect(sample(text, 'idempotency_cache_lookups_total', { result: 'hit' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'idempotency_cache_hit_ratio')).toBeGreaterThan(0);
    expect(sample(text, 'idempotency_redis_breaker_open', { breaker: 'redis' })).toBe(0);
    expect(sample(text, 'idempotency_store_duration_count', { store: 'postgres', operation: 'claim', error: 'false' })).toBeGreaterThanOrEqual(2);
    expect(sample(text, 'idempotency_store_duration_count', { store: 'postgres', operation: 'claim', error: 'true' })).toBe(1);
    expect(sample(text, 'idempotency_store_duration_count', { store: 'redis', operation: 'lookup' })).toBeGreaterThanOrEqual(5);
  });

  it('counts the method guard and the inbox, releases, takeovers and lost completions', async () => {
    const billing = app.get(Billing);
    await expect(billing.invoice('i1', false)).resolves.toBe('invoice i1');
    await expect(billing.invoice('i1', false)).resolves.toBe('invoice i1');
    await expect(billing.invoice('i2', true)).rejects.toThrow('card declined');
    const inbox = app.get(InboxService);
    await inbox.process('m1', 'mailer', () => Promise.resolve(1));
    await inbox.process('m1', 'mailer', () => Promise.resolve(1));

    // A holder that died: its lease lapses, the next claim takes the key over, and the old holder's completion is lost.
    const engine = app.get(IdempotencyService);
    const claim = { scope: 'method:takeover', key: 't1', fingerprint: '', leaseMs: 100, ttlMs: 60_000 };
    const dead = await engine.begin(claim);
    if (dead.kind !== 'acquired') throw new Error(`expected acquired, got ${dead.kind}`);
    await waitUntil('the lapsed lease is taken over', async () => ((await engine.begin(claim)).kind === 'acquired' ? true : undefined));
    expect(await engine.complete(dead.claim, { late: true })).toBe(false);

    const text = await prometheus.scrape();
    expect(sample(text, 'idempotency_claims_total', { face: 'method', outcome: 'replay' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'idempotency_releases_total', { face: 'method' })).toBe(1);
    expect(sample(text, 'idempotency_takeovers_total', { face: 'method' })).toBe(1);
    expect(sample(text, 'idempotency_completions_lost_total', { face: 'method' })).toBe(1);
    expect(sample(text, 'idempotency_claims_total', { face: 'inbox', outcome: 'acquired' })).toBe(1);
    expect(sample(text, 'idempotency_claims_total', { face: 'inbox', outcome: 'replay' })).toBe(1);
  });

  it('counts workflow starts, completions, step attempts and durations, and the workflow face', async () => {
    const client = app.get(WorkflowClient);
    const handle = await client.start(MeteredWorkflow, { n: 21 }, { workflowId: 'w1' });
    await expect(handle.result({ timeout: 30_000 })).resolves.toBe(42);
    await client.start(MeteredWorkflow, { n: 21 }, { workflowId: 'w1' });
    await expect(client.start(MeteredWorkflow, { n: 22 }, { workflowId: 'w1' })).rejects.toBeInstanceOf(WorkflowConflictError);

    const text = await prometheus.scrape();
    expect(sample(text, 'idempotency_workflow_starts_total', { workflow: 'metered' })).toBe(1);
    expect(sample(text, 'idempotency_workflow_completions_total', { status: 'completed' })).toBe(1);
    expect(sample(text, 'idempotency_workflow_step_attempts_sum', { step: 'double', status: 'completed' })).toBe(2);
    expect(sample(text, 'idempotency_workflow_step_duration_count', { step: 'double', outcome: 'retry' })).toBe(1);
    expect(sample(text, 'idempotency_workflow_step_duration_count', { step: 'double', outcome: 'completed' })).toBe(1);
    expect(sample(text, 'idempotency_claims_total', { face: 'workflow', outcome: 'acquired' })).toBe(1);
    expect(sample(text, 'idempotency_claims_total', { face: 'workflow', outcome: 'mismatch' })).toBe(1);
    expect((sample(text, 'idempotency_claims_total', { face: 'workflow', outcome: 'replay' }) ?? 0) +
      (sample(text, 'idempotency_claims_total', { face: 'workflow', outcome: 'in_progress' }) ?? 0)).toBe(1);
  });

  it('counts task enqueues under the task face, not as workflow starts', async () => {
    const tasks = app.get(TaskClient);
    const startsBefore = sample(await prometheus.scrape(), 'idempotency_workflow_starts_total', { workflow: 'metered-mail' }) ?? 0;
    const handle = await tasks.enqueue(Mailer, 'send', ['ann'], { taskId: 'mail-1' });
    await expect(handle.result({ timeout: 30_000 })).resolves.toBe('sent to ann');
    await tasks.enqueue(Mailer, 'send', ['ann'], { taskId: 'mail-1' });
    await expect(tasks.enqueue(Mailer, 'send', ['bob'], { taskId: 'mail-1' })).rejects.toBeInstanceOf(TaskConflictError);

    const text = await prometheus.scrape();
    expect(sample(text, 'idempotency_claims_total', { face: 'task', outcome: 'acquired' })).toBe(1);
    expect(sample(text, 'idempotency_claims_total', { face: 'task', outcome: 'replay' })).toBe(1);
    expect(sample(text, 'idempotency_claims_total', { face: 'task', outcome: 'mismatch' })).toBe(1);
    expect(sample(text, 'idempotency_workflow_starts_total', { workflow: 'metered-mail' }) ?? 0).toBe(startsBefore);
  });

  it('reads the outbox gauges from Postgres at each scrape', async () => {
    const outbox = app.get(OutboxService);
    await app.get(IdempotencyConnections).dataSource.transaction((manager) => outbox.publish(manager, { topic: 'order.created', payload: { id: 1 } }));
    const text = await prometheus.scrape();
    expect(sample(text, 'idempotency_outbox_pending', { topic: 'order.created' })).toBe(1);
    expect(sample(text, 'idempotency_outbox_dead', { topic: 'order.created' })).toBe(0);
  });

  it('counts the claims of transaction: true routes too (their claim is part of the handler transaction)', async () => {
    const post = (key: string, amount: number) => request(url).post('/charge-tx').set('Idempotency-Key', key).send({ amount });
    const acquired = await claims('http', 'acquired');
    const replayed = await claims('http', 'replay');
    const mismatched = await claims('http', 'mismatch');
    const peeks = async () => sample(await prometheus.scrape(), 'idempotency_store_duration_count', { store: 'redis', operation: 'peek', error: 'false' }) ?? 0;
    const peeked = await peeks();
    expect((await post('tx-1', 1)).status).toBe(201);
    expect((await post('tx-1', 1)).headers['idempotent-replayed']).toBe('true');
    expect((await post('tx-1', 2)).status).toBe(422);
    expect(await claims('http', 'acquired')).toBe(acquired + 1);
    expect(await claims('http', 'replay')).toBe(replayed + 1);
    expect(await claims('http', 'mismatch')).toBe(mismatched + 1);
    // Each of these requests read Redis first (the mode's peek at a finished outcome), and that read is counted.
    expect(await peeks()).toBe(peeked + 3);
  });
});
