import { Body, Controller, Headers, INestApplication, Post } from '@nestjs/common';
import Redis from 'ioredis';
import request from 'supertest';
import { BeginResult, Claim, IdempotencyService, IdempotencyStore } from '../../lib';
import { gate, listen, redisKeys, waitUntil } from '../support/resilience';
import { ADAPTERS, createTestApp, redisUrl, sql, uniqueSchema } from '../support/test-app';

function claimOf(result: BeginResult): Claim {
  if (result.kind !== 'acquired') throw new Error(`expected to acquire the key, got ${result.kind}`);
  return result.claim;
}

/** Makes the claim's lease run out now, as if its holder had stalled past it without renewing. */
async function expireLease(schema: string, claim: Claim): Promise<void> {
  const rows = await sql(
    `UPDATE "${schema}".idempotency_records SET locked_until = now() - interval '1 second' WHERE id = $1 AND status = 'in_progress' RETURNING id`,
    [claim.id],
  );
  expect(rows).toHaveLength(1);
}

describe('completion is compare-and-set on the claim token (IdempotencyService)', () => {
  const schema = uniqueSchema('cas');
  const prefix = `idem-${schema}`;
  let app: INestApplication;
  let service: IdempotencyService;
  let store: IdempotencyStore;
  let probe: Redis;

  beforeAll(async () => {
    app = await createTestApp({ adapter: 'express', schema, controllers: [] });
    service = app.get(IdempotencyService);
    store = app.get(IdempotencyStore);
    probe = new Redis(redisUrl());
  });

  afterAll(async () => {
    await app?.close();
    probe?.disconnect();
  });

  it('a slow original that lost its lease cannot overwrite the record of the one that took over', async () => {
    const req = { scope: 'svc', key: 'slow-original', fingerprint: 'fp-1', leaseMs: 30_000, ttlMs: 60_000 };
    const first = claimOf(await service.begin(req));

    // While the lease is live, nobody else gets the key.
    expect((await service.begin(req)).kind).toBe('in_progress');

    // The original stalls past its lease; its Redis marker is gone too.
    await expireLease(schema, first);
    await probe.del(redisKeys(prefix, req.key, req.scope).marker);
    const second = claimOf(await service.begin(req));
    expect(second.token).not.toBe(first.token);
    expect(second.id).toBe(first.id);

    // The original's heartbeat cannot revive it.
    expect(await store.extendLease(first)).toBe(false);

    await expect(service.complete(second, { winner: 'second' })).resolves.toBe(true);
    await expect(service.complete(first, { winner: 'first' })).resolves.toBe(false);
    // A late release by the original does not mark the newer record failed either.
    await service.release(first, { message: 'late failure' });

    const rows = await sql<{ status: string; result: unknown; lease_token: string; attempts: number }>(
      `SELECT status, result, lease_token, attempts FROM "${schema}".idempotency_records WHERE scope = $1 AND key = $2`, [req.scope, req.key],
    );
    expect(rows).toEqual([{ status: 'completed', result: { winner: 'second' }, lease_token: second.token, attempts: 2 }]);

    // Duplicates get the second's result, from Redis and from Postgres alone.
    const replay = await service.begin(req);
    expect(replay).toMatchObject({ kind: 'replay', record: { result: { winner: 'second' } } });
    await probe.del(redisKeys(prefix, req.key, req.scope).record);
    expect(await service.begin(req)).toMatchObject({ kind: 'replay', record: { result: { winner: 'second' } } });
  });

  it('the loser completing first does not block the winner (the loser writes nothing)', async () => {
    const req = { scope: 'svc', key: 'loser-first', fingerprint: 'fp-2', leaseMs: 30_000, ttlMs: 60_000 };
    const first = claimOf(await service.begin(req));
    await expireLease(schema, first);
    await probe.del(redisKeys(prefix, req.key, req.scope).marker);
    const second = claimOf(await service.begin(req));
    await expect(service.complete(first, { winner: 'first' })).resolves.toBe(false);
    expect(await store.find(req.scope, req.key)).toMatchObject({ kind: 'in_progress', fingerprint: 'fp-2' });
    expect(await probe.exists(redisKeys(prefix, req.key, req.scope).record)).toBe(0);
    await expect(service.complete(second, { winner: 'second' })).resolves.toBe(true);
    expect(await store.find(req.scope, req.key)).toMatchObject({ kind: 'completed', record: { result: { winner: 'second' } } });
  });
});

let casRuns = 0;
const holds: ReturnType<typeof gate>[] = [];
const startedRuns: number[] = [];

@Controller()
class TransferController {
  @Post('transfer')
  async transfer(@Headers('idempotency-key') _key: string, @Body() body: { amount: number }) {
    const run = ++casRuns;
    startedRuns.push(run);
    if (run === 1) {
      const hold = gate();
      holds.push(hold);
      await hold.promise;
    }
    return { run, amount: body.amount };
  }
}

describe.each(ADAPTERS)('a slow original that lost its lease, over HTTP (%s)', (adapter) => {
  const schema = uniqueSchema('cash');
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    // Postgres alone, so the lease is all that stands between the original and a takeover.
    app = await createTestApp({ adapter, schema, controllers: [TransferController], options: { redis: false } });
    url = await listen(app);
  });

  afterAll(async () => {
    for (const h of holds) h.open();
    await app?.close();
  });

  it('gets its own response, but the record keeps the newer holder\'s result', async () => {
    casRuns = 0;
    startedRuns.length = 0;
    const key = `cas-${adapter}`;
    const send = () => request(url).post('/transfer').set('Idempotency-Key', key).send({ amount: 10 });
    const original = send().then((r) => r);
    await waitUntil('the original started', () => startedRuns.includes(1));

    const [row] = await sql<{ id: string }>(`SELECT id FROM "${schema}".idempotency_records WHERE key = $1`, [key]);
    await sql(`UPDATE "${schema}".idempotency_records SET locked_until = now() - interval '1 second' WHERE id = $1`, [row.id]);

    const takeover = await send();
    expect(takeover.status).toBe(201);
    expect(takeover.body).toEqual({ run: 2, amount: 10 });

    holds[holds.length - 1].open();
    const late = await original;
    expect(late.status).toBe(201);
    expect(late.body).toEqual({ run: 1, amount: 10 });

    const replay = await send();
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(takeover.text);
    expect(casRuns).toBe(2);
    const rows = await sql<{ status: string }>(`SELECT status FROM "${schema}".idempotency_records WHERE key = $1`, [key]);
    expect(rows).toEqual([{ status: 'completed' }]);
  });
});
