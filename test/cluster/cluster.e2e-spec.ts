import { Body, Controller, INestApplication, Injectable, Post } from '@nestjs/common';
import { Cluster } from 'ioredis';
import request from 'supertest';
import { IdempotentMethod, Step, Workflow, WorkflowClient } from '../../lib';
import { StartedRedisCluster, startRedisCluster, stopRedisCluster } from '../support/services';
import { ADAPTERS, createTestApp, uniqueSchema } from '../support/test-app';
import { WorkflowQueues } from '../../lib/workflow/workflow-queues';
import { bootWorkflowApp, scenario } from '../workflow/support';

jest.setTimeout(90_000);

const NAME = `cluster-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;

let payRuns = 0;
@Controller()
class PayController {
  @Post('pay')
  pay(@Body() body: { amount: number }) {
    payRuns++;
    return { id: payRuns, amount: body.amount };
  }
}

const guardRuns: string[] = [];
@Injectable()
class Invoices {
  @IdempotentMethod()
  create(customer: string, amount: number): Promise<string> {
    guardRuns.push(customer);
    return Promise.resolve(`${customer}:${amount}:${guardRuns.length}`);
  }
}

const stepRuns: string[] = [];
@Workflow({ name: 'cluster-order' })
class ClusterOrder {
  async run(input: { id: string }): Promise<string> {
    const reserved = await this.reserve(input.id);
    return this.charge(reserved);
  }

  @Step()
  reserve(id: string): Promise<string> {
    stepRuns.push(`reserve:${id}`);
    return Promise.resolve(`r-${id}`);
  }

  @Step({ queue: 'payments' })
  charge(reserved: string): Promise<string> {
    stepRuns.push(`charge:${reserved}`);
    return Promise.resolve(`${reserved}:charged`);
  }
}

/** Every key of the cluster, read from each master. */
async function clusterKeys(cluster: Cluster): Promise<string[]> {
  const keys: string[] = [];
  for (const node of cluster.nodes('master')) {
    let cursor = '0';
    do {
      const [next, batch] = await node.scan(cursor, 'COUNT', 1000);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== '0');
  }
  return keys;
}

// Issue 7 item 5: the core HTTP, guard and workflow cases on a real 3-master Redis Cluster.
describe('on a Redis Cluster', () => {
  let started: StartedRedisCluster;
  let inspector: Cluster;

  beforeAll(async () => {
    started = await startRedisCluster(NAME);
    inspector = new Cluster(started.nodes);
  });
  afterAll(async () => {
    inspector?.disconnect();
    await stopRedisCluster(started, NAME);
  });

  describe.each(ADAPTERS)('HTTP (%s)', (adapter) => {
    let app: INestApplication;
    const schema = uniqueSchema('cl');
    beforeAll(async () => {
      app = await createTestApp({ adapter, controllers: [PayController], schema, options: { redis: { cluster: { nodes: started.nodes }, keyPrefix: `idem-${schema}` } } });
    });
    afterAll(() => app?.close());

    it('runs once, replays from the cluster cache, refuses a changed body, and lets concurrent duplicates run once', async () => {
      payRuns = 0;
      const server = app.getHttpServer();
      const first = await request(server).post('/pay').set('Idempotency-Key', 'k1').send({ amount: 5 });
      const second = await request(server).post('/pay').set('Idempotency-Key', 'k1').send({ amount: 5 });
      expect(first.status).toBe(201);
      expect(second.status).toBe(201);
      expect(second.text).toBe(first.text);
      expect(second.headers['idempotent-replayed']).toBe('true');
      expect((await request(server).post('/pay').set('Idempotency-Key', 'k1').send({ amount: 6 })).status).toBe(422);
      expect(payRuns).toBe(1);
      expect((await clusterKeys(inspector)).some((k) => k.startsWith(`idem-${schema}:`))).toBe(true);

      const burst = await Promise.all(Array.from({ length: 10 }, () => request(server).post('/pay').set('Idempotency-Key', 'k2').send({ amount: 7 })));
      expect(burst.every((r) => r.status === 201 || r.status === 409)).toBe(true);
      expect(payRuns).toBe(2);
    });
  });

  it('@IdempotentMethod gives duplicates the stored result', async () => {
    const schema = uniqueSchema('clg');
    const app = await createTestApp({
      adapter: 'express', controllers: [], providers: [Invoices], schema,
      options: { redis: { cluster: { nodes: started.nodes }, keyPrefix: `idem-${schema}` } },
    });
    try {
      const invoices = app.get(Invoices);
      const first = await invoices.create('ada', 10);
      expect(await invoices.create('ada', 10)).toBe(first);
      expect(guardRuns.filter((c) => c === 'ada')).toHaveLength(1);
    } finally {
      await app.close();
    }
  });

  it.each([
    ['redis.cluster nodes, default queue prefix', false],
    ['an ioredis Cluster client', true],
  ])('workflows with %s: complete, each step once, each queue in its own hash tag', async (_label, asClient) => {
    const s = scenario();
    const own = asClient ? new Cluster(started.nodes) : undefined;
    const redis = own ? { client: own, keyPrefix: `idem-${s.schema}` } : { cluster: { nodes: started.nodes }, keyPrefix: `idem-${s.schema}` };
    const { app, client } = await bootWorkflowApp(s, [ClusterOrder], { queuePrefix: undefined }, { redis });
    try {
      await runOrders(client, s.schema);
      const keys = await clusterKeys(inspector);
      const queues = app.get(WorkflowQueues);
      const prefixes = ['workflows', 'steps', 'payments'].map((q) => queues.prefixOf(q));
      // The derived prefix, with each queue's own hash tag: `{idem-wf-<hash>:<queue>}`.
      for (const [i, q] of ['workflows', 'steps', 'payments'].entries()) {
        expect(prefixes[i]).toMatch(new RegExp(`^\\{idem-wf-[0-9a-f]{12}:${q}\\}$`));
        expect(keys.some((k) => k.startsWith(`${prefixes[i]}:${q}:`))).toBe(true);
      }
      // Lock checks of one turn share an MGET per slot: locks of two queues (two hash tags) are answered all the same.
      const locks = [0, 0, 1].map((q, n) => ({ key: `${prefixes[q]}:lock-test:${s.schema}-${n}:lock`, token: `token-${n}` }));
      for (const lock of locks) await inspector.set(lock.key, lock.token);
      expect(await Promise.all(locks.map((lock) => queues.lockHolds('steps', lock)))).toEqual([true, true, true]);
      expect(await Promise.all(locks.map((lock) => queues.lockHolds('steps', { ...lock, token: 'another' })))).toEqual([false, false, false]);
    } finally {
      await app.close();
      own?.disconnect();
    }
  });
});

async function runOrders(client: WorkflowClient, tag: string): Promise<void> {
  const ids = Array.from({ length: 5 }, (_, i) => `${tag}-${i}`);
  const handles = await Promise.all(ids.map((id) => client.start(ClusterOrder, { id }, { workflowId: id })));
  expect(await Promise.all(handles.map((h) => h.result({ timeout: '60s' })))).toEqual(ids.map((id) => `r-${id}:charged`));
  for (const id of ids) {
    expect(stepRuns.filter((r) => r === `reserve:${id}`)).toHaveLength(1);
    expect(stepRuns.filter((r) => r === `charge:r-${id}`)).toHaveLength(1);
  }
}
