import { INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Queue } from 'bullmq';
import { randomUUID } from 'node:crypto';
import { AddressInfo, connect, createServer, Socket } from 'node:net';
import { IdempotencyModule, OutboxService } from '../../lib';
import { IdempotencyConnections } from '../../lib/storage/idempotency-connections';
import { databaseUrl, redisUrl, uniqueSchema } from '../support/test-app';
import { eventually } from './support';

/**
 * A TCP proxy in front of the test Redis that can stall: while `stalled`, what clients send is held back (and sent on
 * when released), so every Redis call through it hangs, as on a Redis that stops answering.
 */
function stallableProxy(target: URL) {
  const held: (() => void)[] = [];
  const sockets = new Set<Socket>();
  const state = { stalled: false };
  const server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    client.on('data', (chunk) => (state.stalled ? held.push(() => upstream.write(chunk)) : upstream.write(chunk)));
    upstream.on('data', (chunk) => client.write(chunk));
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  return {
    server,
    stall: () => (state.stalled = true),
    release: () => {
      state.stalled = false;
      for (const send of held.splice(0)) send();
    },
    close: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

describe('outbox bullmq target whose Redis stops answering', () => {
  const schema = uniqueSchema('obto');
  const queueName = `stall-${randomUUID().slice(0, 8)}`;
  const proxy = stallableProxy(new URL(redisUrl()));
  let app: INestApplicationContext;

  beforeAll(async () => {
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    const port = (proxy.server.address() as AddressInfo).port;
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          postgres: { url: databaseUrl(), schema },
          redis: { url: `redis://127.0.0.1:${port}`, keyPrefix: `idem-${schema}` },
          migrationsRun: true,
          outbox: {
            topics: { 'payment.created': { to: 'bullmq', queue: queueName } },
            relay: { pollInterval: 100 },
            deliveryTimeout: '250ms',
            maxAttempts: 2,
            backoff: { type: 'fixed', delay: 50 },
          },
          retention: { cleanupInterval: false },
        }),
      ],
    })
    class StallingRedisModule {}
    app = await NestFactory.createApplicationContext(StallingRedisModule, { logger: false });
  });

  afterAll(async () => {
    proxy.release();
    await app?.close();
    proxy.close();
    const queue = new Queue(queueName, { connection: { url: redisUrl() } });
    await queue.obliterate({ force: true }).catch(() => undefined);
    await queue.close();
  });

  it('fails each hung addBulk after outbox.deliveryTimeout, retries it, keeps the message dead after maxAttempts; re-driven, one job', async () => {
    const outbox = app.get(OutboxService);
    const dataSource = app.get(IdempotencyConnections).dataSource;
    proxy.stall();
    const id = await dataSource.transaction((manager) => outbox.publish(manager, { topic: 'payment.created', key: 'p-1', payload: { n: 1 } }));
    const [dead] = await eventually(async () => {
      const list = await outbox.messages({ status: 'dead' });
      return list.length > 0 ? list : undefined;
    }, 'the message dead after two timed-out attempts');
    expect(dead).toMatchObject({ id, attempts: 2, lastError: expect.stringMatching(/^OutboxDeliveryTimeoutError: .* did not finish within 250 ms/) });

    // Redis answers again: the held addBulk calls land late (the job id keeps them one job); the re-drive finds it there.
    proxy.release();
    expect(await outbox.retry(id)).toBe(true);
    await eventually(async () => (await outbox.messages({ status: 'delivered' })).some((m) => m.id === id), 'the re-driven message delivered');
    const queue = new Queue(queueName, { connection: { url: redisUrl() } });
    try {
      expect((await queue.getJob(id))?.data).toMatchObject({ id, payload: { n: 1 } });
      expect(await queue.count()).toBe(1);
    } finally {
      await queue.close();
    }
  });
});
