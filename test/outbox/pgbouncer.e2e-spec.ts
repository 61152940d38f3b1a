import { INestApplicationContext, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { ChildProcess } from 'node:child_process';
import { IdempotencyModule, OutboxDelivery, OutboxHandler, OutboxService } from '../../lib';
import { IdempotencyConnections } from '../../lib/storage/idempotency-connections';
import { databaseUrl, uniqueSchema } from '../support/test-app';
import { eventually } from './support';

interface ServicesModule {
  startPgBouncer(name: string, postgresUrl: string, options?: { poolSize?: number }): Promise<{ url: string; proc: ChildProcess; pidFile: string }>;
  stopPgBouncer(bouncer: unknown): Promise<void>;
}
// eslint-disable-next-line @typescript-eslint/no-require-imports
const services = require('../../scripts/services') as ServicesModule;

@Injectable()
class Received {
  readonly deliveries: OutboxDelivery[] = [];

  @OutboxHandler('evt')
  handle(delivery: OutboxDelivery): void {
    this.deliveries.push(delivery);
  }
}

// Behind PgBouncer in transaction pooling LISTEN is not dependable (the polling fallback covers it) and consecutive
// transactions of one client land on different server connections: each claim-deliver-mark (BEGIN sent with the
// claim, COMMIT with the mark) must stay one transaction on one server connection.
describe('outbox relay behind PgBouncer (transaction pooling)', () => {
  const schema = uniqueSchema('obpgb');
  let bouncer: Awaited<ReturnType<ServicesModule['startPgBouncer']>> | undefined;
  let app: INestApplicationContext;

  beforeAll(async () => {
    bouncer = await services.startPgBouncer(`pgb-${process.pid}-${schema}`, databaseUrl(), { poolSize: 4 });
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          postgres: { url: bouncer.url, schema, preparedStatements: false, poolSize: 6 },
          redis: false,
          migrationsRun: true,
          outbox: { topics: { evt: { to: 'handler' } }, relay: { pollInterval: 200, batchSize: 7, concurrency: 3 } },
          retention: { cleanupInterval: false },
        }),
      ],
      providers: [Received],
    })
    class BouncerModule {}
    app = await NestFactory.createApplicationContext(BouncerModule, { logger: false });
  });

  afterAll(async () => {
    await app?.close();
    await services.stopPgBouncer(bouncer);
  });

  it('delivers every message once, each key in publish order', async () => {
    const outbox = app.get(OutboxService);
    const dataSource = app.get(IdempotencyConnections).dataSource;
    const messages = Array.from({ length: 60 }, (_, i) => ({ topic: 'evt', key: i % 5 === 4 ? undefined : `k${i % 5}`, payload: i }));
    await dataSource.transaction((manager) => outbox.publish(manager, messages.slice(0, 30)));
    await dataSource.transaction((manager) => outbox.publish(manager, messages.slice(30)));
    const received = app.get(Received).deliveries;
    await eventually(() => received.length >= 60 || undefined, 'all 60 deliveries', 30_000);
    expect(new Set(received.map((d) => d.id)).size).toBe(60);
    for (const key of ['k0', 'k1', 'k2', 'k3']) {
      expect(received.filter((d) => d.key === key).map((d) => d.payload)).toEqual(messages.filter((m) => m.key === key).map((m) => m.payload));
    }
    await eventually(async () => (await outbox.stats()).delivered === 60 || undefined, 'every message marked delivered');
  });
});
