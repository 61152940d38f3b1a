import { IdempotencyConfigError } from '../errors/idempotency-config.error';
import { resolveOptions } from '../utils/validate-options';
import { parseRate } from './queue-options';
import { QueueSettings } from './queue-settings';

const BASE = { postgres: { url: 'postgres://postgres@127.0.0.1:5432/db' }, redis: { url: 'redis://127.0.0.1:6379' } };

function problem(queues: unknown, extra: Record<string, unknown> = {}): string {
  try {
    resolveOptions({ ...BASE, ...extra, queues } as never);
  } catch (err) {
    expect(err).toBeInstanceOf(IdempotencyConfigError);
    return (err as Error).message;
  }
  throw new Error('expected an IdempotencyConfigError');
}

describe('queues option', () => {
  it('parses rates per second, minute and hour', () => {
    expect(parseRate('100/s')).toEqual({ max: 100, durationMs: 1000 });
    expect(parseRate('20/min')).toEqual({ max: 20, durationMs: 60_000 });
    expect(parseRate('5/h')).toEqual({ max: 5, durationMs: 3_600_000 });
    expect(parseRate(' 7 / second ')).toEqual({ max: 7, durationMs: 1000 });
  });

  it('refuses a malformed rate, duration, concurrency or priority, naming the option and what is accepted', () => {
    expect(problem({ stripe: { rateLimit: '100 per second' } })).toMatch(/queues\.stripe\.rateLimit: expected a rate such as "100\/s", "20\/min" or "5\/h"/);
    expect(problem({ stripe: { rateLimit: '0/s' } })).toContain('queues.stripe.rateLimit');
    expect(problem({ stripe: { retention: '30 days' } })).toContain('queues.stripe.retention');
    expect(problem({ stripe: { concurrency: 0 } })).toContain('queues.stripe.concurrency: expected a whole number of at least 1');
    expect(problem({ stripe: { priority: 0 } })).toContain('queues.stripe.priority');
    expect(problem({ stripe: { rateLimt: '1/s' } })).toMatch(/queues\.stripe\.rateLimt.*rateLimit/);
    expect(problem({ stripe: { retention: '1d' } }, { retention: { queues: { stripe: '2d' } } })).toContain('queues.stripe.retention');
  });

  it('gives worker options, job priority and retention per queue, defaults elsewhere', () => {
    const options = resolveOptions({ ...BASE, queues: { stripe: { rateLimit: '20/s', concurrency: 3, priority: 2, retention: '30d' } } });
    const settings = new QueueSettings(options);
    expect(settings.for('stripe', 10)).toEqual({ worker: { concurrency: 3, limiter: { max: 20, duration: 1000 } }, job: { priority: 2 }, retentionMs: 30 * 86_400_000 });
    expect(settings.for('other', 10)).toEqual({ worker: { concurrency: 10 }, job: {} });
    expect(settings.retentionOf('stripe')).toBe(30 * 86_400_000);
    expect(options.retention.queuesMs).toEqual({ stripe: 30 * 86_400_000 });
  });

  it('refuses, once queues are declared, a queue name nobody uses, listing the known ones', () => {
    const settings = new QueueSettings(resolveOptions({ ...BASE, queues: { stirpe: { concurrency: 2 } } }));
    settings.declare(['stripe', 'orders']);
    expect(() => settings.assertKnown()).toThrow(IdempotencyConfigError);
    expect(() => settings.assertKnown()).toThrow(/queues\.stirpe: no workflow, step or task uses queue "stirpe" \(known queues: "orders", "stripe"\)/);
    settings.declare(['stirpe']);
    expect(() => settings.assertKnown()).not.toThrow();
  });

  it('refuses a retention on a queue that carries only steps, naming the option it was given in', () => {
    const given = (options: object) => {
      const settings = new QueueSettings(resolveOptions({ ...BASE, ...options }));
      settings.declare(['orders']);
      settings.declare(['stripe', 'orders'], 'steps');
      return settings;
    };
    expect(() => given({ queues: { stripe: { retention: '30d' } } }).assertKnown()).toThrow(/queues\.stripe\.retention: queue "stripe" carries only steps/);
    expect(() => given({ retention: { queues: { stripe: '30d' } } }).assertKnown()).toThrow(/retention\.queues\.stripe: queue "stripe" carries only steps/);
    // A queue that carries a workflow as well as steps keeps that workflow's executions: accepted.
    expect(() => given({ queues: { orders: { retention: '30d' } } }).assertKnown()).not.toThrow();
  });
});
