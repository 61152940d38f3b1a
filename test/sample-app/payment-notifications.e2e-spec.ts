import { INestApplication, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Queue } from 'bullmq';
import { randomUUID } from 'node:crypto';
import { listen } from '../support/resilience';
import { databaseUrl, redisUrl, sql, uniqueSchema } from '../support/test-app';
import { eventually } from '../outbox/support';

const TOKEN = `token-${randomUUID()}`;

/** The sample app with Redis: a charge publishes payment.created in its transaction; a BullMQ worker notifies through the inbox. */
describe('sample app: every payment publishes payment.created and is notified once', () => {
  const saved = { ...process.env };
  const schema = uniqueSchema('samplentf');
  const queueName = `payment-events-${randomUUID().slice(0, 8)}`;
  let app: INestApplication;
  let base: string;

  const pay = async (key: string, body: unknown) => {
    const res = await fetch(`${base}/payments`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Idempotency-Key': key, Authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify(body),
    });
    return { status: res.status, json: (await res.json()) as { id: string } };
  };
  const notified = async (paymentId: string) => {
    const res = await fetch(`${base}/notifications/payments/${paymentId}`, { headers: { Authorization: `Bearer ${TOKEN}` } });
    return (await res.json()) as { notifications: number; runs: number };
  };
  const messagesFor = (paymentId: string) =>
    sql<{ id: string; status: string }>(`SELECT id, status FROM "${schema}".outbox_messages WHERE topic = 'payment.created' AND payload->>'id' = $1`, [paymentId]);

  beforeAll(async () => {
    Object.assign(process.env, {
      DATABASE_URL: databaseUrl(), REDIS_URL: redisUrl(), IDEMPOTENCY_SCHEMA: schema, IDEMPOTENCY_REDIS_PREFIX: `idem-${schema}`,
      WORKFLOWS_QUEUE_PREFIX: `{wf-${schema}}`, OUTBOX_PAYMENTS_QUEUE: queueName, SAMPLE_API_TOKENS: `${TOKEN}=client-a`,
    });
    const { AppModule } = (await import('../../sample-app/app.module')) as { AppModule: Type<unknown> };
    app = await NestFactory.create(AppModule, { logger: false });
    base = await listen(app);
  });

  afterAll(async () => {
    await app?.close();
    const queue = new Queue(queueName, { connection: { url: redisUrl() } });
    await queue.obliterate({ force: true }).catch(() => undefined);
    await queue.close();
    for (const name of Object.keys(process.env)) if (!(name in saved)) delete process.env[name];
    Object.assign(process.env, saved);
  });

  it('delivers the charge\'s payment.created as a BullMQ job (id = message id) that records one notification; a replayed charge publishes nothing', async () => {
    const key = `pay-${randomUUID()}`;
    const first = await pay(key, { amount: 4200, currency: 'EUR' });
    expect(first.status).toBe(201);
    await eventually(async () => (await notified(first.json.id)).notifications === 1 || undefined, 'the notification');
    const [message] = await messagesFor(first.json.id);
    await eventually(async () => (await messagesFor(first.json.id))[0]?.status === 'delivered', 'the message marked delivered');
    const queue = new Queue(queueName, { connection: { url: redisUrl() } });
    const job = await queue.getJob(message.id);
    await queue.close();
    expect(job?.data).toMatchObject({ id: message.id, topic: 'payment.created', payload: first.json });

    expect((await pay(key, { amount: 4200, currency: 'EUR' })).status).toBe(201);
    expect(await messagesFor(first.json.id)).toHaveLength(1);
    expect(await notified(first.json.id)).toEqual({ paymentId: first.json.id, notifications: 1, runs: 1 });
  });
});
