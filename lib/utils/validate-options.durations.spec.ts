import { IdempotencyConfigError } from '../errors/idempotency-config.error';
import { resolveOptions } from './validate-options';

const PG = { url: 'postgres://postgres@127.0.0.1:5432/db' };
const REDIS = { url: 'redis://127.0.0.1:6379' };
const DAYS_25 = 25 * 86_400_000;

describe('resolveOptions: durations over 24.8 days (Node timer limit)', () => {
  it('accepts 25d wherever the library itself runs the timer or the SQL', () => {
    const r = resolveOptions({
      postgres: PG,
      redis: { ...REDIS, commandTimeout: '25d', breaker: { resetAfter: '25d' } },
      http: { ttl: '25d', lockTimeout: '25d', wait: '25d' },
      workflows: { recoveryInterval: '25d', pollInterval: '25d' },
      retention: { default: '25d', workflows: '25d', inbox: '25d', cleanupInterval: '25d' },
    });
    expect(r.workflows.recoveryIntervalMs).toBe(DAYS_25);
    expect(r.workflows.pollIntervalMs).toBe(DAYS_25);
    expect(r.retention.intervalMs).toBe(DAYS_25);
    expect(r.http.leaseMs).toBe(DAYS_25);
    expect(r.redis && r.redis.commandTimeoutMs).toBe(DAYS_25);
  });

  it.each(['stalledInterval', 'lockDuration'])('refuses workflows.%s at 25d at startup, naming its maximum (BullMQ runs it as a timer)', (option) => {
    let error: unknown;
    try {
      resolveOptions({ postgres: PG, redis: REDIS, workflows: { [option]: '25d' } });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(IdempotencyConfigError);
    expect((error as IdempotencyConfigError).problems).toEqual([expect.stringMatching(new RegExp(`^workflows\\.${option}: at most 2147483647 ms .*BullMQ`))]);
  });

  it.each(['stalledInterval', 'lockDuration'])('accepts workflows.%s at 24 days', (option) => {
    expect(() => resolveOptions({ postgres: PG, redis: REDIS, workflows: { [option]: '24d' } })).not.toThrow();
  });
});
