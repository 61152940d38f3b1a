import { IdempotencyConfigError } from '../errors/idempotency-config.error';
import { Idempotent } from '../http/idempotent.decorator';
import { IdempotentMethod } from '../guard/idempotent-method.decorator';
import { checkStepOptions, checkWorkflowOptions } from '../workflow/workflow-definition.validator';
import { appliedToPaymentsPay } from '../../test/support/applied-method-decorator';
import { nearestKey } from './known-keys';
import { resolveOptions } from './validate-options';

const PG = { url: 'postgres://postgres@127.0.0.1:5432/db' };
const REDIS = { url: 'redis://127.0.0.1:6379' };

function problemsOf(run: () => unknown): string[] {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(IdempotencyConfigError);
    return (err as IdempotencyConfigError).problems;
  }
  throw new Error('expected an IdempotencyConfigError, nothing was thrown');
}

const resolveWith = (extra: Record<string, unknown>) => () => resolveOptions({ postgres: PG, redis: REDIS, ...extra });

describe('unknown option keys (issue 7 item 13)', () => {
  it.each<[string, Record<string, unknown>, string]>([
    ['workflows.prefix', { workflows: { prefix: 'x' } }, 'workflows.prefix: unknown option; did you mean workflows.queuePrefix?'],
    ['a top-level typo', { retnetion: {} }, 'retnetion: unknown option; did you mean retention?'],
    ['http.tll', { http: { tll: '1h' } }, 'http.tll: unknown option; did you mean http.ttl?'],
    ['http.failopen', { http: { failopen: true } }, 'http.failopen: unknown option; did you mean http.failOpen?'],
    ['retention.cleanupIntervall', { retention: { cleanupIntervall: '1h' } }, 'retention.cleanupIntervall: unknown option; did you mean retention.cleanupInterval?'],
    ['postgres.pool', { postgres: { ...PG, pool: 5 } }, 'postgres.pool: unknown option; did you mean postgres.poolSize?'],
    ['redis.breaker.threshold', { redis: { ...REDIS, breaker: { threshold: 2 } } }, 'redis.breaker.threshold: unknown option; did you mean redis.breaker.failureThreshold?'],
    ['redis.keyprefix with a url', { redis: { ...REDIS, keyprefix: 'x' } }, 'redis.keyprefix: unknown option; did you mean redis.keyPrefix?'],
  ])('%s fails startup naming the key and the nearest valid one', (_, extra, expected) => {
    const problems = problemsOf(resolveWith(extra));
    expect(problems).toEqual([expect.stringContaining(expected)]);
  });

  it('a key with no near match lists the valid options of its section', () => {
    expect(problemsOf(resolveWith({ workflows: { zzz: 1 } }))).toEqual([expect.stringMatching(/^workflows\.zzz: unknown option; \(the options of workflows are .*queuePrefix.*pollInterval/)]);
  });

  it('every unknown key is reported in the one error, with the other bad options', () => {
    const problems = problemsOf(resolveWith({ http: { tll: 1, ttl: 'soon' }, workflows: { prefix: 'x' } }));
    expect(problems).toHaveLength(3);
  });

  it('ioredis keys beside a url are refused with where they belong', () => {
    expect(problemsOf(resolveWith({ redis: { ...REDIS, tls: {} } }))).toEqual([expect.stringMatching(/^redis\.tls: unknown option.*ioredis options go in redis\.options/)]);
  });

  it('accepts what is not the module\'s to check: plain ioredis options, redis.options, a DataSource, queue names, functions', () => {
    const ioredis = { host: '127.0.0.1', port: 6379, connectTimeout: 500, enableAutoPipelining: true, retryStrategy: () => 100, keyPrefix: 'p', commandTimeout: 100 };
    expect(() => resolveWith({ redis: ioredis })()).not.toThrow();
    expect(() => resolveWith({ redis: { options: { host: 'h', anythingIoredisTakes: 1 } } })()).not.toThrow();
    const dataSource = { query: () => undefined, options: { type: 'postgres' }, isInitialized: true };
    expect(() => resolveWith({ postgres: { dataSource, schema: 's' } })()).not.toThrow();
    expect(() => resolveWith({ retention: { queues: { payments: '30d', 'my-queue': '0' } }, http: { scope: () => 't' } })()).not.toThrow();
    expect(() => resolveWith({ migrationsRun: true, http: { enabled: true, header: 'X-Key', ttl: '1h', lockTimeout: '5s', required: false, methods: ['POST'], replayHeaders: [], ignoreBodyFields: [], failOpen: false, wait: false, retryableStatuses: [429], storeServerErrors: false } })()).not.toThrow();
  });

  it('a url or poolSize beside dataSource is refused instead of silently ignored', () => {
    const problems = problemsOf(resolveWith({ postgres: { dataSource: 'default', url: PG.url, poolSize: 3 } }));
    expect(problems).toEqual([expect.stringMatching(/^postgres\.url: give either url or dataSource/), expect.stringMatching(/^postgres\.poolSize: has no effect with dataSource/)]);
  });

  it('@Idempotent() refuses an unknown key when the class is loaded, naming the route or controller', () => {
    expect(problemsOf(appliedToPaymentsPay(Idempotent({ tll: '1h' } as never)))).toEqual([expect.stringMatching(/^@Idempotent\(\) on Payments\.pay: tll: unknown option; did you mean ttl\?/)]);
    expect(problemsOf(appliedToPaymentsPay(Idempotent({ failOpen: true } as never)))).toEqual([expect.stringContaining('failOpen: unknown option')]);
    class Orders {}
    expect(problemsOf(() => Idempotent({ tll: '1h' } as never)(Orders))).toEqual([expect.stringMatching(/^@Idempotent\(\) on Orders: tll: unknown option/)]);
    expect(appliedToPaymentsPay(Idempotent({ ttl: '1h' }))).not.toThrow();
  });

  it('@IdempotentMethod() refuses an unknown key when the class is loaded, naming the class and method', () => {
    expect(problemsOf(appliedToPaymentsPay(IdempotentMethod({ onDuplicates: 'raise' } as never)))).toEqual([expect.stringMatching(/^@IdempotentMethod\(\) on Payments\.pay: onDuplicates: unknown option; did you mean onDuplicate\?/)]);
    expect(appliedToPaymentsPay(IdempotentMethod({ ttl: '1h', lockTimeout: '5s', waitTimeout: '1s', onDuplicate: 'wait', onFailure: 'lock', key: () => 'k', scope: 's' }))).not.toThrow();
  });

  it('@Workflow() and @Step() name the nearest valid key', () => {
    const problems: string[] = [];
    checkWorkflowOptions({ timout: '1s' } as never, 'W', problems);
    checkStepOptions({ attemps: 3 } as never, 'm', '@Step() on W.m', problems);
    expect(problems).toEqual([expect.stringContaining('unknown option "timout"; did you mean timeout?'), expect.stringContaining('unknown option "attemps"; did you mean attempts?')]);
  });
});

describe('nearestKey', () => {
  it.each<[string, string[], string | undefined]>([
    ['prefix', ['queuePrefix', 'concurrency'], 'queuePrefix'],
    ['concurency', ['queuePrefix', 'concurrency'], 'concurrency'],
    ['TTL', ['ttl', 'lockTimeout'], 'ttl'],
    ['xyz', ['queuePrefix', 'concurrency'], undefined],
    ['a', ['ab', 'abc'], 'ab'],
  ])('%s among %p → %p', (key, known, expected) => {
    expect(nearestKey(key, known)).toBe(expected);
  });
});
