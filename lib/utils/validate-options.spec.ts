import { IdempotencyConfigError } from '../errors/idempotency-config.error';
import type { IdempotencyModuleOptions } from '../interfaces/idempotency-options.interface';
import { resolveOptions, resolveRouteOptions } from './validate-options';

const PG = { url: 'postgres://postgres@127.0.0.1:5432/db' };
const REDIS = { url: 'redis://127.0.0.1:6379' };

function configError(run: () => unknown): IdempotencyConfigError {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(IdempotencyConfigError);
    return err as IdempotencyConfigError;
  }
  throw new Error('expected an IdempotencyConfigError, nothing was thrown');
}

function resolveWith(extra: Record<string, unknown>) {
  return resolveOptions({ postgres: PG, redis: REDIS, ...extra });
}

describe('resolveOptions: defaults', () => {
  it('resolves the documented defaults', () => {
    const r = resolveOptions({ postgres: PG, redis: REDIS });
    expect(r.postgres).toEqual({ kind: 'url', url: PG.url, schema: 'public', poolSize: 20, preparedStatements: true });
    expect(r.redis).toEqual({
      connection: { url: REDIS.url },
      keyPrefix: undefined,
      commandTimeoutMs: 250,
      failureThreshold: 3,
      resetAfterMs: 5000,
    });
    expect(r.migrationsRun).toBe(false);
    expect(r.http.enabled).toBe(true);
    expect(r.http.global).toBe(true);
    expect(r.http.header).toBe('idempotency-key');
    expect(r.http.ttlMs).toBe(24 * 3_600_000);
    expect(r.http.leaseMs).toBe(30_000);
    expect(r.http.required).toBe(false);
    expect([...r.http.methods].sort()).toEqual(['PATCH', 'POST']);
    expect(r.http.scope).toBeUndefined();
    expect(r.http.replayHeaders).toEqual([]);
    expect(r.http.ignoreBodyFields).toEqual([]);
    expect(r.http.failOpen).toBe(false);
    expect(r.http.waitMs).toBe(0);
  });

  it('accepts redis: false and the other connection forms', () => {
    expect(resolveOptions({ postgres: PG, redis: false }).redis).toBe(false);
    const client = { evalsha: () => undefined };
    const withClient = resolveWith({ redis: { client } });
    expect(withClient.redis && withClient.redis.connection).toEqual({ client });
    const withOptions = resolveWith({ redis: { options: { host: '127.0.0.1', port: 1 } } });
    expect(withOptions.redis && withOptions.redis.connection).toEqual({ options: { host: '127.0.0.1', port: 1 } });
    const ds = resolveWith({ postgres: { dataSource: 'default' } });
    expect(ds.postgres).toEqual({ kind: 'dataSource', dataSource: 'default', schema: undefined, preparedStatements: true });
  });

  it('parses given values', () => {
    const r = resolveWith({
      postgres: { ...PG, schema: 'idem', poolSize: 4, preparedStatements: false },
      redis: { ...REDIS, keyPrefix: 'p', commandTimeout: '50ms', breaker: { failureThreshold: 5, resetAfter: '2s' } },
      migrationsRun: true,
      http: {
        header: 'X-Request-Key', ttl: '1h', lockTimeout: 5000, required: true, methods: ['post', 'put'],
        replayHeaders: ['X-Trace'], ignoreBodyFields: ['meta.sentAt'], failOpen: true, wait: '3s', enabled: false,
        global: false,
      },
    });
    expect(r.postgres).toEqual({ kind: 'url', url: PG.url, schema: 'idem', poolSize: 4, preparedStatements: false });
    expect(r.redis).toMatchObject({ keyPrefix: 'p', commandTimeoutMs: 50, failureThreshold: 5, resetAfterMs: 2000 });
    expect(r.migrationsRun).toBe(true);
    expect(r.http).toMatchObject({
      enabled: false, global: false, header: 'x-request-key', ttlMs: 3_600_000, leaseMs: 5000, required: true,
      replayHeaders: ['X-Trace'], ignoreBodyFields: ['meta.sentAt'], failOpen: true, waitMs: 3000,
    });
    expect([...r.http.methods].sort()).toEqual(['POST', 'PUT']);
  });

  it('treats wait: false as no waiting', () => {
    expect(resolveWith({ http: { wait: false } }).http.waitMs).toBe(0);
  });
});

describe('resolveOptions: invalid options', () => {
  it('rejects a missing options object', () => {
    const err = configError(() => resolveOptions(undefined));
    expect(err.message).toContain('options');
  });

  it.each<[string, string, Record<string, unknown>]>([
    ['missing postgres', 'postgres', { postgres: undefined }],
    ['empty postgres', 'postgres.url', { postgres: {} }],
    ['non-postgres url', 'postgres.url', { postgres: { url: 'mysql://x' } }],
    ['bad schema', 'postgres.schema', { postgres: { ...PG, schema: '' } }],
    ['long schema', 'postgres.schema', { postgres: { ...PG, schema: 's'.repeat(64) } }],
    ['bad poolSize', 'postgres.poolSize', { postgres: { ...PG, poolSize: 0 } }],
    ['fractional poolSize', 'postgres.poolSize', { postgres: { ...PG, poolSize: 2.5 } }],
    ['non-boolean preparedStatements', 'postgres.preparedStatements', { postgres: { ...PG, preparedStatements: 'no' } }],
    ['bad dataSource', 'postgres.dataSource', { postgres: { dataSource: 42 } }],
    ['redis string', 'redis', { redis: 'x' }],
    ['missing redis', 'redis', { redis: undefined }],
    ['redis url not redis', 'redis.url', { redis: { url: 'http://x' } }],
    ['redis empty object', 'redis.url', { redis: {} }],
    ['redis client not ioredis', 'redis.client', { redis: { client: {} } }],
    ['redis options not object', 'redis.options', { redis: { options: 'x' } }],
    ['redis keyPrefix empty', 'redis.keyPrefix', { redis: { ...REDIS, keyPrefix: '' } }],
    ['redis commandTimeout', 'redis.commandTimeout', { redis: { ...REDIS, commandTimeout: 'soon' } }],
    ['redis commandTimeout zero', 'redis.commandTimeout', { redis: { ...REDIS, commandTimeout: 0 } }],
    ['redis breaker', 'redis.breaker', { redis: { ...REDIS, breaker: 'x' } }],
    ['breaker threshold', 'redis.breaker.failureThreshold', { redis: { ...REDIS, breaker: { failureThreshold: 0 } } }],
    ['breaker resetAfter', 'redis.breaker.resetAfter', { redis: { ...REDIS, breaker: { resetAfter: 'abc' } } }],
    ['migrationsRun', 'migrationsRun', { migrationsRun: 'yes' }],
    ['http not object', 'http', { http: 5 }],
    ['http.enabled', 'http.enabled', { http: { enabled: 1 } }],
    ['http.global', 'http.global', { http: { global: 'no' } }],
    ['http.header', 'http.header', { http: { header: 'Bad Header' } }],
    ['http.ttl', 'http.ttl', { http: { ttl: 'abc' } }],
    ['http.ttl zero', 'http.ttl', { http: { ttl: 0 } }],
    ['http.ttl negative', 'http.ttl', { http: { ttl: -5 } }],
    ['http.lockTimeout', 'http.lockTimeout', { http: { lockTimeout: '2 minutes' } }],
    ['http.required', 'http.required', { http: { required: 'true' } }],
    ['http.methods not array', 'http.methods', { http: { methods: 'POST' } }],
    ['http.methods unknown', 'http.methods', { http: { methods: ['FETCH'] } }],
    ['http.scope', 'http.scope', { http: { scope: 'tenant' } }],
    ['http.replayHeaders', 'http.replayHeaders', { http: { replayHeaders: [1] } }],
    ['http.ignoreBodyFields', 'http.ignoreBodyFields', { http: { ignoreBodyFields: [''] } }],
    ['http.failOpen', 'http.failOpen', { http: { failOpen: 'no' } }],
    ['http.wait', 'http.wait', { http: { wait: 'later' } }],
    ['http.wait true', 'http.wait', { http: { wait: true } }],
    ['unknown key', 'redsi', { redsi: {} }],
  ])('%s → IdempotencyConfigError naming %s', (_name, option, extra) => {
    const err = configError(() => resolveWith(extra));
    expect(err.name).toBe('IdempotencyConfigError');
    expect(err.message).toContain(`${option}:`);
    expect(err.problems.some((p) => p.startsWith(`${option}:`))).toBe(true);
  });

  it('lists every bad option in one error', () => {
    const err = configError(() => resolveOptions({
      postgres: {},
      redis: 'x',
      migrationsRun: 1,
      http: { ttl: 'abc', lockTimeout: 'soon', methods: ['NOPE'], header: '' },
    } as unknown as IdempotencyModuleOptions));
    for (const option of ['postgres.url', 'redis', 'migrationsRun', 'http.ttl', 'http.lockTimeout', 'http.methods', 'http.header']) {
      expect(err.message).toContain(`${option}:`);
    }
    expect(err.problems).toHaveLength(7);
  });
});

describe('resolveOptions: statuses that may release a key, headers that may be replayed', () => {
  it('refuses a success or redirect status in retryableStatuses: released, it would run its handler again on every retry', () => {
    const err = configError(() => resolveOptions({ postgres: PG, redis: REDIS, http: { retryableStatuses: [429, 200, 302] } }));
    expect(err.problems).toEqual([expect.stringMatching(/^http\.retryableStatuses: 200, 302 are not error statuses: only 4xx and 5xx/)]);
    expect(resolveOptions({ postgres: PG, redis: REDIS, http: { retryableStatuses: [429, 503] } }).http.retryableStatuses).toEqual(new Set([429, 503]));
  });

  it('refuses Set-Cookie and hop-by-hop headers in replayHeaders instead of ignoring them, on the module and on a route', () => {
    const err = configError(() => resolveOptions({ postgres: PG, redis: REDIS, http: { replayHeaders: ['X-Request-Cost', 'Set-Cookie', 'connection'] } }));
    expect(err.problems).toEqual([expect.stringMatching(/^http\.replayHeaders: Set-Cookie, connection are never stored or replayed/)]);
    const base = resolveOptions({ postgres: PG, redis: REDIS, http: { replayHeaders: ['X-Request-Cost'] } }).http;
    expect(base.replayHeaders).toEqual(['X-Request-Cost']);
    expect(configError(() => resolveRouteOptions(base, { replayHeaders: ['set-cookie'] }, 'Payments.pay')).message).toContain('@Idempotent() on Payments.pay: replayHeaders: set-cookie is never stored');
  });
});

describe('resolveRouteOptions', () => {
  const base = resolveOptions({ postgres: PG, redis: REDIS }).http;

  it('keeps the base settings where the route says nothing', () => {
    expect(resolveRouteOptions(base, {}, 'pay')).toEqual(base);
  });

  it('overrides per route', () => {
    const scope = () => 't';
    const r = resolveRouteOptions(base, { ttl: '1m', lockTimeout: '2s', required: true, scope, replayHeaders: ['X-A'], ignoreBodyFields: ['a'], wait: '1s' }, 'pay');
    expect(r).toMatchObject({ ttlMs: 60_000, leaseMs: 2000, required: true, scope, replayHeaders: ['X-A'], ignoreBodyFields: ['a'], waitMs: 1000 });
    expect(r.methods).toBe(base.methods);
    expect(resolveRouteOptions({ ...base, waitMs: 500 }, { wait: false }, 'pay').waitMs).toBe(0);
  });

  it('names the route and every bad option', () => {
    const err = configError(() => resolveRouteOptions(base, { ttl: 'nope', lockTimeout: 0, required: 'x' }, 'createOrder'));
    expect(err.problems).toHaveLength(3);
    expect(err.message).toContain('createOrder');
    expect(err.message).toContain('ttl:');
    expect(err.message).toContain('lockTimeout:');
    expect(err.message).toContain('required:');
  });
});

describe('resolveOptions: redis as plain ioredis options', () => {
  it('passes { host, port, … } to ioredis and keeps the module settings apart', () => {
    const r = resolveOptions({
      postgres: { url: 'postgres://u@h/db' },
      redis: { host: '127.0.0.1', port: 6380, db: 2, keyPrefix: 'app', commandTimeout: '50ms' },
    });
    expect(r.redis).toMatchObject({ connection: { options: { host: '127.0.0.1', port: 6380, db: 2 } }, keyPrefix: 'app', commandTimeoutMs: 50 });
    expect(r.redis && 'options' in r.redis.connection && r.redis.connection.options).not.toHaveProperty('keyPrefix');
  });

  it('still refuses an object that is none of the forms', () => {
    expect(() => resolveOptions({ postgres: { url: 'postgres://u@h/db' }, redis: { hots: 'x' } as never })).toThrow(/redis\.url/);
  });
});
