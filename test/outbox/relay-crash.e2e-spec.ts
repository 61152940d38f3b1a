import { INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { DataSource } from 'typeorm';
import { IdempotencyModule, OutboxService } from '../../lib';
import { IdempotencyConnections } from '../../lib/storage/idempotency-connections';
import { databaseUrl, sql, uniqueSchema } from '../support/test-app';
import { RelayChild, spawnRelay, stop } from './relay-processes';
import { eventually } from './support';

const MESSAGES = 10_000;
const KEYS = 200;

describe('outbox relay across processes and crashes', () => {
  const schema = uniqueSchema('obx');
  let app: INestApplicationContext;
  let outbox: OutboxService;
  let dataSource: DataSource;
  const relays: RelayChild[] = [];

  const relay = (env: Record<string, string> = {}): RelayChild => {
    const child = spawnRelay({ DATABASE_URL: databaseUrl(), TEST_SCHEMA: schema, ...env });
    relays.push(child);
    return child;
  };
  const delivered = async () => (await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "${schema}".outbox_messages WHERE status = 'delivered'`))[0].n;

  beforeAll(async () => {
    // The publishing side only: this instance runs no relay.
    @Module({
      imports: [IdempotencyModule.forRoot({
        postgres: { url: databaseUrl(), schema }, redis: false, migrationsRun: true,
        outbox: { topics: { evt: { to: 'handler' } }, relay: { enabled: false } },
      })],
    })
    class PublisherModule {}
    app = await NestFactory.createApplicationContext(PublisherModule, { logger: false });
    outbox = app.get(OutboxService);
    dataSource = app.get(IdempotencyConnections).dataSource;
    await sql(`CREATE TABLE "${schema}".received (seq bigserial PRIMARY KEY, message_id text NOT NULL, key text NOT NULL, n int NOT NULL, pid int NOT NULL)`);
    await sql(`CREATE TABLE "${schema}".effects (message_id text NOT NULL)`);
  });

  afterEach(async () => {
    await Promise.all(relays.splice(0).map((r) => stop(r)));
    await sql(`TRUNCATE "${schema}".received, "${schema}".effects, "${schema}".outbox_messages, "${schema}".inbox_messages`);
  });

  afterAll(() => app.close());

  it('delivers again a message whose relay was killed after delivering it and before marking it', async () => {
    const id = await dataSource.transaction((m) => outbox.publish(m, { topic: 'evt', key: 'k', payload: { key: 'k', n: 0 } }));
    const doomed = relay({ HANG_ON: id });
    await doomed.line(`delivered ${id}`);
    await stop(doomed);
    relay();
    await eventually(async () => (await delivered()) === 1, 'the message delivered by the second relay', 60_000);
    const receipts = await sql<{ pid: number }>(`SELECT pid FROM "${schema}".received ORDER BY seq`);
    expect(receipts.map((r) => r.pid)).toEqual([doomed.proc.pid, expect.any(Number)]);
    expect(receipts[1].pid).not.toBe(doomed.proc.pid);
    expect(await sql(`SELECT message_id FROM "${schema}".effects`)).toEqual([{ message_id: id }]);
  });

  it(`relays ${MESSAGES} messages over ${KEYS} keys with three relays, one SIGKILLed repeatedly: all delivered, in key order, once through the inbox`, async () => {
    const all = Array.from({ length: MESSAGES }, (_, i) => ({ key: `key-${i % KEYS}`, n: Math.floor(i / KEYS) }));
    for (let i = 0; i < MESSAGES; i += 1000) {
      const chunk = all.slice(i, i + 1000);
      await dataSource.transaction((m) => outbox.publish(m, chunk.map((p) => ({ topic: 'evt', key: p.key, payload: p }))));
    }
    relay();
    relay();
    let victim = relay();
    const killed = new Set<number>();
    await victim.line('ready');
    for (let kills = 0; kills < 5 && (await delivered()) < MESSAGES; kills++) {
      // Kill once it is mid-stream: after it has received more messages since it started.
      const pid = victim.proc.pid as number;
      await eventually(async () => (await sql(`SELECT 1 FROM "${schema}".received WHERE pid = $1 LIMIT 1`, [pid])).length > 0 || (await delivered()) === MESSAGES, 'the victim delivering', 60_000);
      await stop(victim);
      killed.add(pid);
      victim = relay();
      await victim.line('ready');
    }
    await eventually(async () => (await delivered()) === MESSAGES, 'every message delivered', 240_000);

    const received = await sql<{ message_id: string; key: string; n: number; pid: number }>(`SELECT message_id, key, n, pid FROM "${schema}".received ORDER BY seq`);
    const ids = new Set(received.map((r) => r.message_id));
    expect(ids.size).toBe(MESSAGES);
    // Per key, the consumer sees n never go back (a redelivery repeats the last one, nothing later overtakes it).
    const last = new Map<string, number>();
    const backwards = received.filter((r) => {
      const before = last.get(r.key) ?? -1;
      last.set(r.key, r.n);
      return r.n < before;
    });
    expect(backwards).toEqual([]);
    // A message is received twice only when a killed relay had received it first.
    const seen = new Map<string, number>();
    const unexplained: string[] = [];
    for (const r of received) {
      const firstPid = seen.get(r.message_id);
      if (firstPid === undefined) seen.set(r.message_id, r.pid);
      else if (!killed.has(firstPid)) unexplained.push(r.message_id);
    }
    expect(unexplained).toEqual([]);
    const duplicates = received.length - MESSAGES;
    process.stdout.write(`outbox crash test: ${killed.size} kills, ${duplicates} duplicate deliveries at the relay\n`);
    const effects = await sql<{ n: number; distinct: number }>(`SELECT count(*)::int AS n, count(DISTINCT message_id)::int AS distinct FROM "${schema}".effects`);
    expect(effects).toEqual([{ n: MESSAGES, distinct: MESSAGES }]);
  }, 400_000);
});
