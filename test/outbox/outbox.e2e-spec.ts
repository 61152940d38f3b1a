import { INestApplicationContext, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Queue } from 'bullmq';
import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import {
  IdempotencyModule, OutboxDelivery, OutboxDeliveryTimeoutError, OutboxHandler, OutboxMessageNotFoundError, OutboxNotInTransactionError, OutboxService,
  OutboxTopicUnknownError,
} from '../../lib';
import { IdempotencyConnections } from '../../lib/storage/idempotency-connections';
import { databaseUrl, redisUrl, sql, uniqueSchema } from '../support/test-app';
import { eventually } from './support';
import { outboxSql } from '../../lib/outbox/outbox.sql';

@Injectable()
class Deliveries {
  readonly received: OutboxDelivery[] = [];
  /** Topics whose handler throws. */
  readonly failing = new Set<string>();

  /** Per message id of "webhook.slow": its attempts up to this one hang until their signal aborts; the rest resolve at once. */
  readonly hangUntilAttempt = new Map<string, number>();
  readonly aborted: unknown[] = [];

  @OutboxHandler('webhook.slow')
  async onSlowWebhook(delivery: OutboxDelivery): Promise<void> {
    if (delivery.attempt <= (this.hangUntilAttempt.get(delivery.id) ?? 0)) {
      // A hung HTTP call: it never settles on its own, and stops only when the relay gives up on the attempt.
      await new Promise<never>((_, reject) => delivery.signal?.addEventListener('abort', () => {
        this.aborted.push(delivery.signal?.reason);
        reject(delivery.signal?.reason as Error);
      }));
    }
    this.received.push(delivery);
  }

  @OutboxHandler('order.created')
  onOrder(delivery: OutboxDelivery): void {
    if (this.failing.has(delivery.topic)) throw new Error('webhook answered 502');
    this.received.push(delivery);
  }
}

describe('OutboxService and the relay', () => {
  const schema = uniqueSchema('outbox');
  const queueName = `outbox-${randomUUID().slice(0, 8)}`;
  const prefix = `{ob-${randomUUID().slice(0, 8)}}`;
  let app: INestApplicationContext;
  let outbox: OutboxService;
  let deliveries: Deliveries;
  let dataSource: DataSource;
  let queue: Queue;

  const statusOf = async (id: string) => (await sql<{ status: string }>(`SELECT status FROM "${schema}".outbox_messages WHERE id = $1`, [id]))[0]?.status;

  beforeAll(async () => {
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          postgres: { url: databaseUrl(), schema },
          redis: { url: redisUrl(), keyPrefix: `idem-${schema}` },
          migrationsRun: true,
          outbox: {
            topics: { 'order.created': { to: 'handler' }, 'webhook.slow': { to: 'handler', timeout: '300ms' }, 'payment.created': { to: 'bullmq', queue: queueName, prefix } },
            // A long poll interval: prompt delivery can only come from the commit notification.
            relay: { pollInterval: '60s', batchSize: 50 },
            maxAttempts: 3,
            backoff: { type: 'fixed', delay: 50 },
          },
        }),
      ],
      providers: [Deliveries],
    })
    class OutboxTestModule {}
    app = await NestFactory.createApplicationContext(OutboxTestModule, { logger: process.env.OUTBOX_TEST_LOG ? ['warn', 'error'] : false });
    outbox = app.get(OutboxService);
    deliveries = app.get(Deliveries);
    dataSource = app.get(IdempotencyConnections).dataSource;
    queue = new Queue(queueName, { connection: { url: redisUrl() }, prefix });
  });

  afterAll(async () => {
    await queue.obliterate({ force: true }).catch(() => undefined);
    await queue.close();
    await app.close();
  });

  beforeEach(() => {
    deliveries.received.length = 0;
    deliveries.failing.clear();
    deliveries.hangUntilAttempt.clear();
    deliveries.aborted.length = 0;
  });

  it('stores nothing when the publishing transaction rolls back, and delivers promptly after a commit', async () => {
    const rolledBack = randomUUID();
    await expect(
      dataSource.transaction(async (manager) => {
        await outbox.publish(manager, { topic: 'order.created', id: rolledBack, payload: { n: 1 } });
        throw new Error('business write failed');
      }),
    ).rejects.toThrow('business write failed');
    const committed = await dataSource.transaction((manager) => outbox.publish(manager, { topic: 'order.created', payload: { n: 2 }, headers: { trace: 't-1' } }));
    // Delivered long before the 60 s poll: the commit's NOTIFY woke the relay.
    const got = await eventually(() => deliveries.received.find((d) => d.id === committed), 'the committed message', 15_000);
    expect(got).toMatchObject({ topic: 'order.created', payload: { n: 2 }, headers: { trace: 't-1' }, attempt: 1, key: null });
    expect(committed).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7/);
    await eventually(async () => (await statusOf(committed)) === 'delivered', 'the message marked delivered');
    expect(await statusOf(rolledBack)).toBeUndefined();
    expect(deliveries.received.map((d) => d.id)).toEqual([committed]);
  });

  it('delivers each key in publish order, whatever the batching', async () => {
    const messages = Array.from({ length: 60 }, (_, i) => ({ topic: 'order.created', key: `k${i % 3}`, payload: { i } }));
    await dataSource.transaction((manager) => outbox.publish(manager, messages.slice(0, 30)));
    await dataSource.transaction((manager) => outbox.publish(manager, messages.slice(30)));
    await eventually(() => deliveries.received.length >= 60 || undefined, 'all 60 deliveries');
    for (const key of ['k0', 'k1', 'k2']) {
      const order = deliveries.received.filter((d) => d.key === key).map((d) => (d.payload as { i: number }).i);
      expect(order).toEqual(messages.map((m, i) => (m.key === key ? i : -1)).filter((i) => i >= 0));
    }
  });

  it('adds a BullMQ job whose id is the message id, once even when the message is relayed again', async () => {
    const id = await dataSource.transaction((manager) => outbox.publish(manager, { topic: 'payment.created', key: 'p-1', payload: { amount: 5 } }));
    const job = await eventually(() => queue.getJob(id), 'the job');
    expect(job.data).toMatchObject({ id, topic: 'payment.created', key: 'p-1', payload: { amount: 5 } });
    await eventually(async () => (await statusOf(id)) === 'delivered', 'the message marked delivered');
    // As if the relay had crashed between adding the job and marking the message.
    await sql(`UPDATE "${schema}".outbox_messages SET status = 'pending', delivered_at = NULL WHERE id = $1`, [id]);
    await sql(`SELECT pg_notify($1, '')`, [outboxSql(schema, true).channel]);
    await eventually(async () => (await statusOf(id)) === 'delivered', 'the message relayed again');
    expect(await queue.getJobCounts('waiting', 'active', 'completed', 'delayed', 'failed')).toMatchObject({ waiting: 1 });
  });

  it('retries a failing delivery, then keeps it dead and blocks its key until retry(id)', async () => {
    deliveries.failing.add('order.created');
    const [first, second] = await dataSource.transaction((manager) =>
      outbox.publish(manager, [{ topic: 'order.created', key: 'acct-9', payload: 1 }, { topic: 'order.created', key: 'acct-9', payload: 2 }]),
    );
    await eventually(async () => (await statusOf(first)) === 'dead', 'the first message dead after 3 attempts');
    const [dead] = await outbox.messages({ status: 'dead' });
    expect(dead).toMatchObject({ id: first, attempts: 3, lastError: 'Error: webhook answered 502' });
    expect(await statusOf(second)).toBe('pending');
    const stats = await outbox.stats();
    expect(stats.topics['order.created']).toMatchObject({ dead: 1, pending: 1 });
    expect(stats.oldestPendingAgeMs).toEqual(expect.any(Number));

    deliveries.failing.clear();
    expect(await outbox.retry(first)).toBe(true);
    expect(await outbox.retry(first)).toBe(false);
    await eventually(() => deliveries.received.length === 2 || undefined, 'both messages after the re-drive');
    expect(deliveries.received.map((d) => d.id)).toEqual([first, second]);
    expect(deliveries.received[0].attempt).toBe(1);
    await expect(outbox.retry('no-such-message')).rejects.toBeInstanceOf(OutboxMessageNotFoundError);
  });

  it('fails a hung handler call after its delivery timeout, aborts its signal, and retries it, so the key moves on', async () => {
    const [hung, next] = [randomUUID(), randomUUID()];
    deliveries.hangUntilAttempt.set(hung, 1);
    await dataSource.transaction((manager) =>
      outbox.publish(manager, [{ id: hung, topic: 'webhook.slow', key: 'hook-1', payload: 1 }, { id: next, topic: 'webhook.slow', key: 'hook-1', payload: 2 }]),
    );
    await eventually(async () => (await statusOf(next)) === 'delivered', 'both messages delivered after the timed-out attempt');
    expect(deliveries.received.map((d) => [d.id, d.attempt])).toEqual([[hung, 2], [next, 1]]);
    expect(deliveries.aborted).toEqual([expect.any(OutboxDeliveryTimeoutError)]);
    expect(deliveries.aborted[0]).toMatchObject({ code: 'OUTBOX_DELIVERY_TIMEOUT', messageId: hung, timeoutMs: 300 });
    const [row] = await sql<{ attempts: number }>(`SELECT attempts FROM "${schema}".outbox_messages WHERE id = $1`, [hung]);
    expect(row.attempts).toBe(2);
  });

  it('keeps a handler that always hangs dead after maxAttempts timeouts, with the timeout as its last error', async () => {
    const id = randomUUID();
    deliveries.hangUntilAttempt.set(id, Number.MAX_SAFE_INTEGER);
    await dataSource.transaction((manager) => outbox.publish(manager, { id, topic: 'webhook.slow', key: 'hook-2', payload: 1 }));
    await eventually(async () => (await statusOf(id)) === 'dead', 'the message dead after 3 timed-out attempts');
    const [dead] = await outbox.messages({ status: 'dead', topic: 'webhook.slow' });
    expect(dead).toMatchObject({ id, attempts: 3, lastError: expect.stringMatching(/^OutboxDeliveryTimeoutError: delivery of outbox message .* did not finish within 300 ms/) });
    expect(deliveries.aborted).toHaveLength(3);
    expect(await outbox.skip(id)).toBe(true);
  });

  it('walks past a key blocked in front of a long backlog: more keys than a batch holds and unkeyed messages all go, each key in order', async () => {
    const stuck = randomUUID();
    deliveries.hangUntilAttempt.set(stuck, Number.MAX_SAFE_INTEGER);
    await dataSource.transaction((manager) =>
      outbox.publish(manager, [
        { id: stuck, topic: 'webhook.slow', key: 'stuck', payload: 0 },
        ...Array.from({ length: 40 }, (_, i) => ({ topic: 'webhook.slow', key: 'stuck', payload: i + 1 })),
      ]),
    );
    // 120 keys (the batch holds 50) with 2 messages each, and 30 without a key, all behind the blocked key's backlog.
    const others = Array.from({ length: 270 }, (_, i) => ({ topic: 'order.created', key: i < 240 ? `walk-${i % 120}` : undefined, payload: { i } }));
    await dataSource.transaction((manager) => outbox.publish(manager, others));
    await eventually(() => deliveries.received.filter((d) => d.topic === 'order.created').length >= 270 || undefined, 'every message of the other keys');
    for (const key of ['walk-0', 'walk-77', 'walk-119']) {
      expect(deliveries.received.filter((d) => d.key === key).map((d) => (d.payload as { i: number }).i)).toEqual(others.flatMap((m, i) => (m.key === key ? [i] : [])));
    }
    expect(new Set(deliveries.received.filter((d) => d.topic === 'order.created').map((d) => d.id)).size).toBe(270);
    await eventually(async () => (await statusOf(stuck)) === 'dead', 'the blocking message dead');
    expect(deliveries.received.filter((d) => d.key === 'stuck')).toEqual([]);
    expect((await outbox.stats()).topics['webhook.slow']).toMatchObject({ dead: 1, pending: 40 });
    expect(await outbox.skip(stuck)).toBe(true);
    await eventually(() => deliveries.received.filter((d) => d.key === 'stuck').length === 40 || undefined, 'the blocked backlog after skip(id)');
    expect(deliveries.received.filter((d) => d.key === 'stuck').map((d) => d.payload)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
  });

  it('refuses to publish outside a transaction or to an unknown topic', async () => {
    await expect(outbox.publish(dataSource.manager, { topic: 'order.created', payload: 1 })).rejects.toBeInstanceOf(OutboxNotInTransactionError);
    await expect(dataSource.transaction((m) => outbox.publish(m, { topic: 'order.shipped', payload: 1 }))).rejects.toBeInstanceOf(OutboxTopicUnknownError);
  });
});
