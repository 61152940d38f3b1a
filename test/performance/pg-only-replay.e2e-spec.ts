// Issue 9 item 4: with `redis: false`, a replay is one indexed read. It takes no write lock at all, so it is
// answered even while writers to the record table are held off (here by a lock that only blocks writers, as
// maintenance may take); before, every replay ran the claim's INSERT and waited behind such a lock.
import { Body, Controller, Post } from '@nestjs/common';
import { Client } from 'pg';
import { Harness, Runs, startApp } from '../support/http-harness';
import { ADAPTERS, databaseUrl } from '../support/test-app';

@Controller('orders')
class OrdersController {
  constructor(private readonly runs: Runs) {}

  @Post()
  create(@Body() body: { amount: number }) {
    return { run: this.runs.inc('orders'), amount: body.amount };
  }
}

describe.each(ADAPTERS)('Postgres-only replays are reads (%s)', (adapter) => {
  let h: Harness;
  let locker: Client;

  beforeAll(async () => {
    h = await startApp({ adapter, controllers: [OrdersController], options: { redis: false } });
    locker = new Client({ connectionString: databaseUrl() });
    await locker.connect();
  });
  afterAll(async () => {
    await locker?.end();
    await h?.close();
  });

  it('a replay is answered while writes to the record table are blocked; a new key waits for them', async () => {
    const first = await h.http().post('/orders').set('Idempotency-Key', 'k1').send({ amount: 5 });
    expect(first.status).toBe(201);

    await locker.query('BEGIN');
    // EXCLUSIVE blocks INSERT/UPDATE/DELETE (ROW EXCLUSIVE) but not SELECT (ACCESS SHARE).
    await locker.query(`LOCK TABLE "${h.schema}".idempotency_records IN EXCLUSIVE MODE`);
    let newKeyDone = false;
    const newKey = h.http().post('/orders').set('Idempotency-Key', 'k2').send({ amount: 6 }).then((res) => {
      newKeyDone = true;
      return res;
    });
    try {
      // Generous bound: without the read path this request waits for the lock until it is released below.
      const replay = await h.http().post('/orders').set('Idempotency-Key', 'k1').send({ amount: 5 }).timeout(15_000);
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);
      const mismatch = await h.http().post('/orders').set('Idempotency-Key', 'k1').send({ amount: 7 }).timeout(15_000);
      expect(mismatch.status).toBe(422);
      // The first-time key needs the claim's write, which the lock holds back: it must not have been answered.
      expect(newKeyDone).toBe(false);
    } finally {
      await locker.query('ROLLBACK');
    }
    expect((await newKey).status).toBe(201);
    expect(h.runs('orders')).toBe(2);
  });
});
