// Issue 16 item 10: a handler that runs longer than its route's ttl still leaves its outcome to replay: the
// stored outcome lives for `ttl` from completion (in Postgres and in the Redis cache), not from the claim.
import { Controller, Headers, Post } from '@nestjs/common';
import Redis from 'ioredis';
import { Idempotent } from '../../lib';
import { Harness, Runs, startApp } from '../support/http-harness';
import { redisKeys, waitUntil } from '../support/resilience';
import { ADAPTERS, redisUrl, sql } from '../support/test-app';

/** Set per app: whether the handler's own claim has outlived its ttl (read from the record itself). */
let claimExpired: (key: string) => Promise<boolean>;

@Controller('slow')
class SlowController {
  constructor(private readonly runs: Runs) {}

  @Post()
  @Idempotent({ ttl: 1500 })
  async create(@Headers('idempotency-key') key: string) {
    const run = this.runs.inc('slow');
    // Runs until the claim's original expiry (claim time + ttl) has passed: longer than the ttl, however slow the machine.
    await waitUntil('the claim outlives its ttl', () => claimExpired(key), { intervalMs: 100 });
    return { run };
  }
}

describe.each(ADAPTERS)('ttl counts from completion (%s)', (adapter) => {
  describe.each([['Redis + Postgres', true], ['Postgres alone', false]] as const)('%s', (_store, withRedis) => {
    let h: Harness;
    let probe: Redis;

    beforeAll(async () => {
      h = await startApp({ adapter, controllers: [SlowController], options: withRedis ? {} : { redis: false } });
      probe = new Redis(redisUrl());
      claimExpired = async (key) => {
        const [row] = await sql<{ passed: boolean }>(
          `SELECT expires_at <= now() AS passed FROM "${h.schema}".idempotency_records WHERE key = $1 AND status = 'in_progress'`, [key],
        );
        return row?.passed === true;
      };
    });
    afterAll(async () => {
      probe?.disconnect();
      await h?.close();
    });

    it('a handler slower than its ttl is replayed by an immediate retry, not run again', async () => {
      const key = `slow-${withRedis ? 'redis' : 'pg'}`;
      const first = await h.http().post('/slow').set('Idempotency-Key', key).send({});
      expect(first.status).toBe(201);
      const retry = await h.http().post('/slow').set('Idempotency-Key', key).send({});
      expect(retry.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(retry.text).toBe(first.text);
      expect(h.runs('slow')).toBe(1);

      const [row] = await sql<{ status: string; lifetime: string }>(
        `SELECT status, (expires_at - completed_at)::text AS lifetime FROM "${h.schema}".idempotency_records WHERE key = $1`, [key],
      );
      expect(row).toEqual({ status: 'completed', lifetime: '00:00:01.5' });
      if (withRedis) {
        // The cache keeps it too, for what is left of the ttl after completion.
        expect(await probe.pttl(redisKeys(`idem-${h.schema}`, key).record)).toBeGreaterThan(0);
      }
    });
  });
});
