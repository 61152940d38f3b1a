import { IdempotencyConfigError } from '../errors/idempotency-config.error';
import type { IdempotencyModuleOptions } from '../interfaces/idempotency-options.interface';
import { resolveOptions } from '../utils/validate-options';

const base: IdempotencyModuleOptions = { postgres: { url: 'postgres://localhost/db' }, redis: { url: 'redis://localhost:6379' } };

function problems(options: Partial<IdempotencyModuleOptions> & Record<string, unknown>): string[] {
  try {
    resolveOptions({ ...base, ...options });
    return [];
  } catch (err) {
    if (!(err instanceof IdempotencyConfigError)) throw err;
    return err.message.split('\n').slice(1).map((l) => l.replace(/^\s*- /, ''));
  }
}

describe('outbox options', () => {
  it('fills in the documented defaults', () => {
    const resolved = resolveOptions({ ...base, outbox: { topics: { 'order.created': { to: 'bullmq', queue: 'orders' } } } });
    expect(resolved.outbox).toEqual({
      topics: new Map([['order.created', { to: 'bullmq', queue: 'orders', prefix: undefined }]]),
      relay: { enabled: true, batchSize: 100, pollIntervalMs: 1000, concurrency: 2 },
      retentionMs: 7 * 86_400_000,
      maxAttempts: 10,
      backoff: { factor: 2, delayMs: 1000, maxDelayMs: 300_000 },
      deadBlocksKey: true,
      deliveryTimeoutMs: 30_000,
    });
    expect(resolveOptions(base).outbox).toBeUndefined();
  });

  it('gives handler topics the delivery timeout, or their own', () => {
    const resolved = resolveOptions({ ...base, outbox: { topics: { a: { to: 'handler' }, b: { to: 'handler', timeout: '2m' } }, deliveryTimeout: '5s' } });
    expect(resolved.outbox?.deliveryTimeoutMs).toBe(5000);
    expect(resolved.outbox?.topics).toEqual(new Map([['a', { to: 'handler', timeoutMs: 5000 }], ['b', { to: 'handler', timeoutMs: 120_000 }]]));
    expect(problems({ outbox: { topics: { a: { to: 'handler', timeout: 0 } }, deliveryTimeout: 'soon' } } as never)).toEqual([
      expect.stringMatching(/^outbox\.deliveryTimeout: /),
      expect.stringMatching(/^outbox\.topics\.a\.timeout: must be greater than zero/),
    ]);
    expect(problems({ outbox: { topics: { a: { to: 'handler' } }, deliveryTimeout: '30d' } })).toEqual([
      expect.stringMatching(/^outbox\.deliveryTimeout: at most \d+ ms/),
    ]);
  });

  it('names each bad option and the fix', () => {
    expect(problems({ redis: false, outbox: { topics: { a: { to: 'bullmq', queue: 'q' } } } })).toEqual([
      expect.stringMatching(/^outbox\.topics\.a: the bullmq target needs Redis/),
    ]);
    expect(problems({ outbox: { topics: {} } })).toEqual([expect.stringMatching(/^outbox\.topics: expected at least one topic/)]);
    expect(problems({ outbox: { topics: { a: { to: 'kafka' } } } } as never)).toEqual([expect.stringMatching(/^outbox\.topics\.a\.to: expected "bullmq" or "handler"/)]);
    expect(problems({ outbox: { topics: { a: { to: 'handler' } }, maxAttempts: 0, backoff: { type: 'linear' } } } as never)).toEqual([
      expect.stringMatching(/^outbox\.backoff\.type/),
      expect.stringMatching(/^outbox\.maxAttempts/),
    ]);
  });

  it('refuses unknown keys with the nearest known one', () => {
    expect(problems({ outbox: { topics: { a: { to: 'handler' } }, relay: { batchsize: 5 } } } as never)).toEqual([
      expect.stringMatching(/^outbox\.relay\.batchsize: unknown option; did you mean outbox\.relay\.batchSize/),
    ]);
  });
});
