import { INestApplication, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { listen } from '../support/resilience';
import { databaseUrl, uniqueSchema } from '../support/test-app';

const TOKEN_A = `token-a-${randomUUID()}`;
const TOKEN_B = `token-b-${randomUUID()}`;

/** The sample app as users would copy it: every keyed request is scoped to the client its bearer token authenticates. */
describe('sample app: the Idempotency-Key scope is the authenticated client', () => {
  const saved = { ...process.env };
  let app: INestApplication;
  let base: string;

  const pay = async (token: string | undefined, key: string, body: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(`${base}/payments`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Idempotency-Key': key, ...(token ? { Authorization: `Bearer ${token}` } : {}), ...headers },
      body: JSON.stringify(body),
    });
    return { status: res.status, replayed: res.headers.get('Idempotent-Replayed'), location: res.headers.get('Location'), text: await res.text() };
  };
  const ledger = async (): Promise<number> => {
    const res = await fetch(`${base}/payments/ledger/count`, { headers: { Authorization: `Bearer ${TOKEN_A}` } });
    return ((await res.json()) as { count: number }).count;
  };

  beforeAll(async () => {
    // The app reads its settings from the environment; REDIS_URL left out keeps the workflow part (BullMQ) off.
    process.env.DATABASE_URL = databaseUrl();
    delete process.env.REDIS_URL;
    process.env.IDEMPOTENCY_SCHEMA = uniqueSchema('sample');
    process.env.SAMPLE_API_TOKENS = `${TOKEN_A}=client-a,${TOKEN_B}=client-b`;
    const { AppModule } = (await import('../../sample-app/app.module')) as { AppModule: Type<unknown> };
    app = await NestFactory.create(AppModule, { logger: false });
    base = await listen(app);
  });

  afterAll(async () => {
    await app?.close();
    for (const name of Object.keys(process.env)) if (!(name in saved)) delete process.env[name];
    Object.assign(process.env, saved);
  });

  it('a second client sending the first client\'s key gets its own charge, never the first one\'s response', async () => {
    const key = `shared-${randomUUID()}`;
    const body = { amount: 4200, currency: 'EUR' };
    const before = await ledger();
    const first = await pay(TOKEN_A, key, body);
    expect(first.status).toBe(201);
    expect(first.replayed).toBeNull();

    // Client B learned the key and even claims to be client A in a header: the scope ignores headers.
    const other = await pay(TOKEN_B, key, body, { 'X-Tenant': 'client-a', 'X-Client-Id': 'client-a' });
    expect(other.status).toBe(201);
    expect(other.replayed).toBeNull();
    expect(other.text).not.toBe(first.text);
    expect(other.location).not.toBe(first.location);

    // Each client's own retry replays its own response.
    const retryA = await pay(TOKEN_A, key, body);
    expect(retryA).toEqual({ ...first, replayed: 'true' });
    const retryB = await pay(TOKEN_B, key, body);
    expect(retryB).toEqual({ ...other, replayed: 'true' });
    expect(await ledger()).toBe(before + 2);
  });

  it('refuses a keyed request without a valid bearer token before anything runs or is stored', async () => {
    const key = `anon-${randomUUID()}`;
    const before = await ledger();
    expect((await pay(undefined, key, { amount: 100, currency: 'EUR' })).status).toBe(401);
    expect((await pay('not-a-valid-token-at-all', key, { amount: 100, currency: 'EUR' })).status).toBe(401);
    expect(await ledger()).toBe(before);
    // The key was never claimed: the client's first authenticated request with it runs.
    const first = await pay(TOKEN_A, key, { amount: 100, currency: 'EUR' });
    expect(first.status).toBe(201);
    expect(first.replayed).toBeNull();
  });

  it('keeps the provider webhook open and deduplicated by event id', async () => {
    const event = { id: `evt_${randomUUID()}`, type: 'payment.succeeded' };
    const deliver = () => fetch(`${base}/webhooks/payment-provider`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(event) });
    expect(await (await deliver()).json()).toEqual({ eventId: event.id, status: 'processed' });
    expect(await (await deliver()).json()).toEqual({ eventId: event.id, status: 'duplicate' });
  });
});
