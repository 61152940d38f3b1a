// The Redis cache's lookups made in one turn of the event loop go to Redis as one script: each must be answered as
// it would be alone, in the order the lookups were made — a replay, a key in flight (its fingerprint), or a miss
// that marked the key in flight for that lookup only. The peeks of one turn (the transactional mode's read) go as one
// MGET, each answered as alone.
import { Logger } from '@nestjs/common';
import Redis from 'ioredis';
import { randomUUID } from 'node:crypto';
import type { CacheLookup } from '../../lib/storage/idempotency.cache';
import { CircuitBreaker } from '../../lib/storage/redis/circuit-breaker';
import { RedisIdempotencyCache } from '../../lib/storage/redis/redis-idempotency.cache';
import { redisUrl } from '../support/test-app';

describe('RedisIdempotencyCache: the lookups of one turn', () => {
  const prefix = `idem-lookups-${randomUUID().slice(0, 8)}`;
  let redis: Redis;
  let cache: RedisIdempotencyCache;

  beforeAll(() => {
    redis = new Redis(redisUrl());
    const breaker = new CircuitBreaker('redis', { failureThreshold: 5, resetAfterMs: 1_000, timeoutMs: 5_000 }, new Logger('test'));
    cache = new RedisIdempotencyCache({ redis, redisKeyPrefix: prefix }, breaker);
  });

  afterAll(async () => {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  const expiresAt = Date.now() + 60_000;

  /** The same scenario each time, under `scope`: a completed key, a key another request holds, a new key. */
  async function prepare(scope: string): Promise<void> {
    await cache.remember(scope, 'done', { fingerprint: 'fp-done', result: { status: 201, body: { id: 1 } }, expiresAt });
    expect(await cache.lookup(scope, 'held', 'fp-holder', 60_000)).toEqual({ kind: 'miss' }); // marks it in flight
  }

  const lookups: Array<[string, string]> = [
    ['new', 'fp-a'], // a miss: marked for this lookup
    ['new', 'fp-a'], // the same key again: in flight now, with the first lookup's fingerprint
    ['new', 'fp-b'],
    ['done', 'fp-done'], // a replay
    ['done', 'fp-other'], // the record is answered whatever the fingerprint: the caller compares
    ['held', 'fp-other'], // in flight for another request
  ];

  it('answers each lookup as it would be answered alone, in order, with one script for all of them', async () => {
    await prepare('alone');
    const alone: CacheLookup[] = [];
    for (const [key, fingerprint] of lookups) alone.push(await cache.lookup('alone', key, fingerprint, 60_000));

    await prepare('together');
    const evalsha = jest.spyOn(redis, 'evalsha');
    const together = await Promise.all(lookups.map(([key, fingerprint]) => cache.lookup('together', key, fingerprint, 60_000)));
    expect(evalsha).toHaveBeenCalledTimes(1);
    evalsha.mockRestore();

    expect(together).toEqual(alone);
    expect(together.map((l) => l.kind)).toEqual(['miss', 'busy', 'busy', 'hit', 'hit', 'busy']);
    expect(together[1]).toEqual({ kind: 'busy', fingerprint: 'fp-a' });
    expect(together[5]).toEqual({ kind: 'busy', fingerprint: 'fp-holder' });
    // Two replays of one record: each gets a record of its own (one caller's changes never reach another's).
    expect(together[3]).toEqual(together[4]);
    expect((together[3] as { record: unknown }).record).not.toBe((together[4] as { record: unknown }).record);
  });

  it('marks a missed key in flight for the lease of the lookup that missed it', async () => {
    const [first] = await Promise.all([cache.lookup('lease', 'k1', 'fp-1', 30_000), cache.lookup('lease', 'k2', 'fp-2', 60_000)]);
    expect(first).toEqual({ kind: 'miss' });
    const ttl = await redis.pttl(`${prefix}:{5:lease|k1}:f`);
    expect(ttl).toBeGreaterThan(25_000);
    expect(ttl).toBeLessThanOrEqual(30_000);
    expect(await redis.get(`${prefix}:{5:lease|k2}:f`)).toBe('fp-2');
  });

  it('reads the peeks of one turn with one MGET, each answered as alone, marking nothing', async () => {
    await prepare('peeks');
    const keys = ['done', 'held', 'new', 'done'];
    const alone: unknown[] = [];
    for (const key of keys) alone.push(await cache.peek('peeks', key));

    const mget = jest.spyOn(redis, 'mget');
    const get = jest.spyOn(redis, 'get');
    const together = await Promise.all(keys.map((key) => cache.peek('peeks', key)));
    expect(mget).toHaveBeenCalledTimes(1);
    expect(get).not.toHaveBeenCalled();
    mget.mockRestore();
    get.mockRestore();

    expect(together).toEqual(alone);
    expect(together[0]).toMatchObject({ fingerprint: 'fp-done', result: { status: 201, body: { id: 1 } } });
    expect(together.slice(1, 3)).toEqual([undefined, undefined]);
    expect(together[3]).toEqual(together[0]);
    // Nothing was marked: the new key's next lookup misses (and marks it) rather than finding it in flight.
    expect(await cache.lookup('peeks', 'new', 'fp-new', 60_000)).toEqual({ kind: 'miss' });
  });

  it('answers every peek of a batch whose MGET fails as a miss, so Postgres decides', async () => {
    await prepare('peek-fails');
    const mget = jest.spyOn(redis, 'mget').mockRejectedValueOnce(new Error('connection lost'));
    const peeks = await Promise.all(['done', 'new'].map((key) => cache.peek('peek-fails', key)));
    expect(mget).toHaveBeenCalledTimes(1);
    mget.mockRestore();
    expect(peeks).toEqual([undefined, undefined]);
    // Redis is fine again: the record is found.
    expect(await cache.peek('peek-fails', 'done')).toMatchObject({ fingerprint: 'fp-done' });
  });
});
