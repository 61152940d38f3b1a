import { IdempotencyConfigError } from '../errors/idempotency-config.error';
import type { ClusterNode, ClusterOptions } from 'ioredis';
import type { IdempotencyModuleOptions } from '../interfaces/idempotency-options.interface';
import type { ResolvedRetentionOptions } from '../retention/retention.interfaces';
import type { ResolvedHttpOptions, ResolvedOptions, ResolvedWorkflowOptions } from '../interfaces/resolved-options';
import { DEFAULT_PROBLEM_TYPE_BASE } from '../http/problem-details';
import { NEVER_REPLAYED } from '../http/stored-response';
import { resolveTransactionSetting, TransactionSetting } from '../transaction/transaction-options';
import { parseDuration } from './duration';
import { KeyTracker } from './known-keys';
import { MAX_TIMER_MS } from './long-timer';
import { resolveOutbox } from '../outbox/outbox-options';
import { resolveObservability } from '../observability/observability-options';
import { resolveConsole } from '../console/console-options';
import { resolveLogLevel } from '../observability/library-logger';
import { resolveQueues } from '../queues/queue-options';

const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Claims and completions are short: 20 lets first-time keys commit concurrently (bench:http: +20% over 10). */
const DEFAULT_POOL_SIZE = 20;
const DEFAULT_RETRYABLE_STATUSES = new Set([408, 409, 425, 429]);
const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/** An upper bound set by a library downstream, with the reason given in the error. */
interface DurationLimit {
  ms: number;
  why: string;
}

/** BullMQ runs these as plain Node timers (stalled checks, lock renewal), which cannot wait longer than MAX_TIMER_MS. */
const BULLMQ_TIMER: DurationLimit = { ms: MAX_TIMER_MS, why: 'BullMQ runs it as a Node timer, which cannot wait longer' };

/** Collects problems instead of throwing at the first, so one startup error lists every bad option. */
export class Checker {
  readonly problems: string[] = [];
  private readonly keys = new KeyTracker();

  fail(option: string, message: string): void {
    this.problems.push(`${option}: ${message}`);
  }

  /**
   * The options object at `path`, seen through a view that records each key read: read every option of a
   * section through it, and a key nobody reads is reported as unknown by {@link rejectUnknownKeys}.
   */
  track<T>(path: string, value: T, hint?: string): T {
    return this.keys.track(path, value, hint);
  }

  /** Reports every key of a tracked object that validation never read, with the nearest known one. */
  rejectUnknownKeys(): void {
    for (const { option, message } of this.keys.unknownKeys()) this.fail(option, message);
  }

  duration(option: string, value: unknown, fallback: number, { positive = false, max }: { positive?: boolean; max?: DurationLimit } = {}): number {
    if (value === undefined) return fallback;
    const parsed = parseDuration(value);
    if (typeof parsed !== 'number') {
      this.fail(option, parsed.error);
      return fallback;
    }
    if (positive && parsed <= 0) {
      this.fail(option, 'must be greater than zero');
      return fallback;
    }
    if (max !== undefined && parsed > max.ms) {
      this.fail(option, `at most ${max.ms} ms (about 24.8 days, e.g. "24d"): ${max.why}; got ${parsed} ms`);
      return fallback;
    }
    return parsed;
  }

  /** `transaction` and `isolation` of an options object (see resolveTransactionSetting). */
  transaction(prefix: string, options: { transaction?: unknown; isolation?: unknown }, inherited?: TransactionSetting): TransactionSetting {
    const { value, problems } = resolveTransactionSetting({ transaction: options.transaction, isolation: options.isolation }, inherited);
    for (const p of problems) this.fail(`${prefix}${p.option}`, p.message);
    return value;
  }

  boolean(option: string, value: unknown, fallback: boolean): boolean {
    if (value === undefined) return fallback;
    if (typeof value !== 'boolean') {
      this.fail(option, `expected true or false, got ${JSON.stringify(value)}`);
      return fallback;
    }
    return value;
  }

  stringList(option: string, value: unknown): string[] {
    if (value === undefined) return [];
    if (!Array.isArray(value) || value.some((v) => typeof v !== 'string' || v.length === 0)) {
      this.fail(option, 'expected an array of non-empty strings');
      return [];
    }
    return value as string[];
  }

  statusList(option: string, value: unknown, fallback: Set<number>): Set<number> {
    if (value === undefined) return fallback;
    if (!Array.isArray(value) || value.some((v) => typeof v !== 'number' || !Number.isInteger(v) || v < 100 || v > 599)) {
      this.fail(option, `expected an array of HTTP status codes (100-599), got ${JSON.stringify(value)}`);
      return fallback;
    }
    const success = (value as number[]).filter((v) => v < 400);
    if (success.length > 0) {
      // Released, a success would run its handler again on every retry: the double charge this library prevents.
      this.fail(option, `${success.join(', ')} ${success.length === 1 ? 'is not an error status' : 'are not error statuses'}: only 4xx and 5xx responses can release their key; remove ${success.length === 1 ? 'it' : 'them'}`);
      return fallback;
    }
    return new Set(value as number[]);
  }

  /** Response header names for `replayHeaders`: those never stored (Set-Cookie, hop-by-hop) are refused rather than ignored. */
  headerList(option: string, value: unknown): string[] {
    const names = this.stringList(option, value);
    const never = names.filter((n) => NEVER_REPLAYED.has(n.toLowerCase()));
    if (never.length > 0) {
      this.fail(option, `${never.join(', ')} ${never.length === 1 ? 'is' : 'are'} never stored or replayed (a cookie or hop-by-hop header must not be sent to another client's retry); remove ${never.length === 1 ? 'it' : 'them'}`);
      return names.filter((n) => !never.includes(n));
    }
    return names;
  }

  positiveInt(option: string, value: unknown, fallback: number): number {
    if (value === undefined) return fallback;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
      this.fail(option, `expected a whole number of at least 1, got ${JSON.stringify(value)}`);
      return fallback;
    }
    return value;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function resolvePostgres(c: Checker, given: unknown): ResolvedOptions['postgres'] {
  const fallback = { kind: 'url' as const, url: '', schema: 'public', poolSize: DEFAULT_POOL_SIZE, preparedStatements: true };
  if (!isObject(given)) {
    c.fail('postgres', 'required: give { url: "postgres://…" } or { dataSource: "default" } to reuse your TypeORM DataSource');
    return fallback;
  }
  const value = c.track('postgres', given);
  const schema = value.schema;
  if (schema !== undefined && (typeof schema !== 'string' || schema.length === 0 || schema.length > 63)) {
    c.fail('postgres.schema', 'expected a schema name of 1 to 63 characters');
  }
  const preparedStatements = c.boolean('postgres.preparedStatements', value.preparedStatements, true);
  if ('dataSource' in value) {
    const ds = value.dataSource;
    if (typeof ds !== 'string' && !(isObject(ds) && typeof (ds as { query?: unknown }).query === 'function')) {
      c.fail('postgres.dataSource', 'expected a DataSource name (as given to TypeOrmModule) or a DataSource instance');
    }
    if (value.url !== undefined) c.fail('postgres.url', 'give either url or dataSource, not both');
    if (value.poolSize !== undefined) c.fail('postgres.poolSize', "has no effect with dataSource: the DataSource's own pool is used");
    return { kind: 'dataSource', dataSource: ds as string, schema: schema as string | undefined, preparedStatements };
  }
  if (typeof value.url !== 'string' || !/^postgres(ql)?:\/\//.test(value.url)) {
    c.fail('postgres.url', `expected a URL like "postgres://user:pass@host:5432/db", got ${JSON.stringify(value.url)}`);
    return fallback;
  }
  return {
    kind: 'url',
    url: value.url,
    schema: (schema as string | undefined) ?? 'public',
    poolSize: c.positiveInt('postgres.poolSize', value.poolSize, DEFAULT_POOL_SIZE),
    preparedStatements,
  };
}

/** Keys that mark an object as ioredis connection options. */
const IOREDIS_CONNECTION_KEYS = ['host', 'port', 'path', 'sentinels', 'username', 'password', 'db', 'tls'];
/** The module's own Redis settings, kept out of what is passed to ioredis. */
const MODULE_REDIS_KEYS = ['keyPrefix', 'commandTimeout', 'breaker'];

/** `redis.cluster`: the startup nodes of a Redis Cluster and optional ioredis Cluster options. */
function resolveCluster(c: Checker, value: unknown): { cluster: { nodes: ClusterNode[]; options: ClusterOptions } } | undefined {
  const nodes = isObject(value) ? value.nodes : undefined;
  const validNode = (n: unknown) => (typeof n === 'string' && n.length > 0) || (typeof n === 'number' && n > 0) || (isObject(n) && typeof n.port === 'number');
  if (!Array.isArray(nodes) || nodes.length === 0 || !nodes.every(validNode)) {
    c.fail('redis.cluster.nodes', 'expected a non-empty array of startup nodes, e.g. [{ host: "10.0.0.1", port: 6379 }] or ["redis://10.0.0.1:6379"]');
    return undefined;
  }
  const options = (value as Record<string, unknown>).options ?? {};
  if (!isObject(options)) {
    c.fail('redis.cluster.options', 'expected ioredis Cluster options (redisOptions, natMap, …)');
    return undefined;
  }
  return { cluster: { nodes: nodes as ClusterNode[], options } };
}

function resolveRedis(c: Checker, given: unknown): ResolvedOptions['redis'] {
  if (given === false) return false;
  if (!isObject(given)) {
    c.fail('redis', 'required: give { url: "redis://…" }, ioredis options ({ host, port, … }), { cluster: { nodes } }, { client: yourIoredisClient }, or false to run on Postgres alone');
    return false;
  }
  // Plain ioredis options ({ host, port, … }) are all read below and passed on: only the other forms are checked for typos.
  const value = c.track('redis', given, 'ioredis options go in redis.options, or in place of url');
  let connection: Exclude<ResolvedOptions['redis'], false>['connection'] | undefined;
  if ('client' in value) {
    const client = value.client as { evalsha?: unknown } | undefined;
    if (!isObject(client) || typeof client.evalsha !== 'function') c.fail('redis.client', 'expected an ioredis client instance (Redis or Cluster)');
    else connection = { client: value.client as never };
  } else if ('cluster' in value) {
    connection = resolveCluster(c, value.cluster);
  } else if ('options' in value) {
    if (!isObject(value.options)) c.fail('redis.options', 'expected ioredis options (host, port, …)');
    else connection = { options: value.options };
  } else if (typeof value.url === 'string' && /^rediss?:\/\//.test(value.url)) {
    connection = { url: value.url };
  } else if (value.url === undefined && IOREDIS_CONNECTION_KEYS.some((k) => k in value)) {
    // Plain ioredis options: everything but the module's own settings goes to ioredis.
    const ioredisOptions = Object.fromEntries(Object.entries(value).filter(([k]) => !MODULE_REDIS_KEYS.includes(k)));
    connection = { options: ioredisOptions };
  } else {
    c.fail('redis.url', `expected a URL like "redis://127.0.0.1:6379", got ${JSON.stringify(value.url)}`);
  }
  const keyPrefix = value.keyPrefix;
  if (keyPrefix !== undefined && (typeof keyPrefix !== 'string' || keyPrefix.length === 0)) c.fail('redis.keyPrefix', 'expected a non-empty string');
  const breaker = c.track('redis.breaker', value.breaker ?? {});
  if (!isObject(breaker)) c.fail('redis.breaker', 'expected { failureThreshold?, resetAfter? }');
  const b = isObject(breaker) ? breaker : {};
  const resolved = {
    connection: connection ?? { url: '' },
    keyPrefix: typeof keyPrefix === 'string' ? keyPrefix : undefined,
    commandTimeoutMs: c.duration('redis.commandTimeout', value.commandTimeout, 250, { positive: true }),
    failureThreshold: c.positiveInt('redis.breaker.failureThreshold', b.failureThreshold, 3),
    resetAfterMs: c.duration('redis.breaker.resetAfter', b.resetAfter, 5000, { positive: true }),
  };
  return resolved;
}

function resolveHttp(c: Checker, value: unknown): ResolvedHttpOptions {
  const h = value === undefined ? {} : value;
  if (!isObject(h)) {
    c.fail('http', 'expected an object of HTTP settings');
  }
  const o = c.track('http', isObject(h) ? h : {});
  const header = o.header ?? 'Idempotency-Key';
  if (typeof header !== 'string' || !HEADER_NAME.test(header)) c.fail('http.header', `expected an HTTP header name, got ${JSON.stringify(header)}`);
  const methods = o.methods === undefined ? ['POST', 'PATCH'] : c.stringList('http.methods', o.methods).map((m) => m.toUpperCase());
  for (const m of methods) if (!HTTP_METHODS.includes(m)) c.fail('http.methods', `"${m}" is not an HTTP method; use ${HTTP_METHODS.join(', ')}`);
  if (o.scope !== undefined && typeof o.scope !== 'function' && o.scope !== 'global') {
    c.fail('http.scope', `expected a function (request) => string | undefined, or "global" for one scope shared by all clients; got ${JSON.stringify(o.scope)}`);
  }
  const problemTypeBase = o.problemTypeBase ?? DEFAULT_PROBLEM_TYPE_BASE;
  if (typeof problemTypeBase !== 'string' || problemTypeBase.length === 0) {
    c.fail('http.problemTypeBase', `expected a URL prefix such as "https://docs.example.com/problems/", got ${JSON.stringify(problemTypeBase)}`);
  }
  const wait = o.wait === undefined || o.wait === false ? 0 : c.duration('http.wait', o.wait, 0, { positive: true });
  return {
    enabled: c.boolean('http.enabled', o.enabled, true),
    global: c.boolean('http.global', o.global, true),
    header: typeof header === 'string' ? header.toLowerCase() : 'idempotency-key',
    ttlMs: c.duration('http.ttl', o.ttl, 86_400_000, { positive: true }),
    leaseMs: c.duration('http.lockTimeout', o.lockTimeout, 30_000, { positive: true }),
    required: c.boolean('http.required', o.required, false),
    methods: new Set(methods),
    scope: typeof o.scope === 'function' ? (o.scope as ResolvedHttpOptions['scope']) : undefined,
    scopeDefaulted: o.scope === undefined,
    problemTypeBase: typeof problemTypeBase === 'string' ? problemTypeBase : DEFAULT_PROBLEM_TYPE_BASE,
    replayHeaders: c.headerList('http.replayHeaders', o.replayHeaders),
    ignoreBodyFields: c.stringList('http.ignoreBodyFields', o.ignoreBodyFields),
    failOpen: c.boolean('http.failOpen', o.failOpen, false),
    waitMs: wait,
    retryableStatuses: c.statusList('http.retryableStatuses', o.retryableStatuses, DEFAULT_RETRYABLE_STATUSES),
    storeServerErrors: c.boolean('http.storeServerErrors', o.storeServerErrors, false),
    transaction: c.transaction('http.', o),
  };
}

function resolveWorkflows(c: Checker, value: unknown): ResolvedWorkflowOptions {
  if (value !== undefined && !isObject(value)) c.fail('workflows', 'expected an object of workflow settings');
  const o = c.track('workflows', isObject(value) ? value : {});
  const queuePrefix = o.queuePrefix;
  if (queuePrefix !== undefined && (typeof queuePrefix !== 'string' || queuePrefix.length === 0 || queuePrefix.includes(' '))) {
    c.fail('workflows.queuePrefix', `expected a non-empty string without spaces, got ${JSON.stringify(queuePrefix)}`);
  }
  const app = o.app;
  if (app !== undefined && (typeof app !== 'string' || app.length === 0)) {
    c.fail('workflows.app', `expected a non-empty name of this application, got ${JSON.stringify(app)}`);
  }
  return {
    queuePrefix: typeof queuePrefix === 'string' ? queuePrefix : undefined,
    app: typeof app === 'string' ? app : undefined,
    concurrency: c.positiveInt('workflows.concurrency', o.concurrency, 10),
    workflowConcurrency: c.positiveInt('workflows.workflowConcurrency', o.workflowConcurrency, 100),
    recoveryIntervalMs: c.duration('workflows.recoveryInterval', o.recoveryInterval, 30_000, { positive: true }),
    maxRecoveryAttempts: c.positiveInt('workflows.maxRecoveryAttempts', o.maxRecoveryAttempts, 10),
    stalledIntervalMs: c.duration('workflows.stalledInterval', o.stalledInterval, 30_000, { positive: true, max: BULLMQ_TIMER }),
    lockDurationMs: c.duration('workflows.lockDuration', o.lockDuration, 30_000, { positive: true, max: BULLMQ_TIMER }),
    pollIntervalMs: c.duration('workflows.pollInterval', o.pollInterval, 1000, { positive: true }),
    workers: c.boolean('workflows.workers', o.workers, true),
  };
}

function resolveRetention(c: Checker, value: unknown): ResolvedRetentionOptions {
  if (value !== undefined && !isObject(value)) c.fail('retention', 'expected { default?, workflows?, tasks?, queues?, inbox?, cleanupInterval?, batchSize? }');
  const o = c.track('retention', isObject(value) ? value : {});
  const queuesMs: Record<string, number> = {};
  if (o.queues !== undefined) {
    if (!isObject(o.queues)) c.fail('retention.queues', 'expected an object of queue name to duration, e.g. { payments: "30d" }');
    else for (const [queue, duration] of Object.entries(o.queues)) queuesMs[queue] = c.duration(`retention.queues.${queue}`, duration, 0);
  }
  return {
    releasedMs: c.duration('retention.default', o.default, 7 * 86_400_000),
    workflowsMs: c.duration('retention.workflows', o.workflows, 30 * 86_400_000),
    tasksMs: c.duration('retention.tasks', o.tasks, 7 * 86_400_000),
    queuesMs,
    inboxMs: o.inbox === undefined || o.inbox === false ? null : c.duration('retention.inbox', o.inbox, 0),
    intervalMs: o.cleanupInterval === false ? null : c.duration('retention.cleanupInterval', o.cleanupInterval, 3_600_000, { positive: true }),
    batchSize: c.positiveInt('retention.batchSize', o.batchSize, 1000),
  };
}

/** `queues.<name>.retention` is the queue's entry of `retention.queues`: given in both places, it must be one value. */
function mergeQueueRetention(c: Checker, resolved: ResolvedOptions): void {
  for (const [name, queue] of Object.entries(resolved.queues)) {
    if (queue.retentionMs === undefined) continue;
    const other = resolved.retention.queuesMs[name];
    if (other !== undefined && other !== queue.retentionMs) c.fail(`queues.${name}.retention`, `retention.queues.${name} says otherwise; give the queue's retention in one place`);
    resolved.retention.queuesMs[name] = queue.retentionMs;
  }
}

/** Validates module options and fills in defaults; throws one IdempotencyConfigError naming every bad option. */
export function resolveOptions(options: IdempotencyModuleOptions | undefined): ResolvedOptions {
  const c = new Checker();
  if (!isObject(options)) {
    throw new IdempotencyConfigError(['options: IdempotencyModule.forRoot() needs an options object with at least postgres and redis']);
  }
  options = c.track('', options);
  const resolved: ResolvedOptions = {
    postgres: resolvePostgres(c, options.postgres),
    redis: resolveRedis(c, options.redis),
    migrationsRun: c.boolean('migrationsRun', options.migrationsRun, false),
    http: resolveHttp(c, options.http),
    workflows: resolveWorkflows(c, options.workflows),
    retention: resolveRetention(c, options.retention),
    observability: resolveObservability(c, options.observability),
    console: resolveConsole(c, options.console),
    logLevel: resolveLogLevel(c, options.logLevel),
    queues: resolveQueues(c, options.queues),
  };
  mergeQueueRetention(c, resolved);
  resolved.outbox = resolveOutbox(c, options.outbox, resolved.redis !== false);
  c.rejectUnknownKeys();
  if (c.problems.length > 0) throw new IdempotencyConfigError(c.problems);
  return resolved;
}

/** A route's `scope`: its function, none for `"global"`, the module's when unset. */
function routeScope(c: Checker, value: unknown, fallback: ResolvedHttpOptions['scope']): ResolvedHttpOptions['scope'] {
  if (value === undefined) return fallback;
  if (value === 'global') return undefined;
  if (typeof value === 'function') return value as ResolvedHttpOptions['scope'];
  c.fail('scope', `expected a function (request) => string | undefined, or "global"; got ${JSON.stringify(value)}`);
  return fallback;
}

/** Parses the per-route overrides of `@Idempotent()`; route options are checked once per route. */
export function resolveRouteOptions(base: ResolvedHttpOptions, route: Record<string, unknown>, where: string): ResolvedHttpOptions {
  const c = new Checker();
  const merged = c.track('', route);
  const r: ResolvedHttpOptions = {
    ...base,
    ttlMs: c.duration('ttl', merged.ttl, base.ttlMs, { positive: true }),
    leaseMs: c.duration('lockTimeout', merged.lockTimeout, base.leaseMs, { positive: true }),
    required: c.boolean('required', merged.required, base.required),
    scope: routeScope(c, merged.scope, base.scope),
    replayHeaders: merged.replayHeaders === undefined ? base.replayHeaders : c.headerList('replayHeaders', merged.replayHeaders),
    ignoreBodyFields: merged.ignoreBodyFields === undefined ? base.ignoreBodyFields : c.stringList('ignoreBodyFields', merged.ignoreBodyFields),
    waitMs: merged.wait === undefined ? base.waitMs : merged.wait === false ? 0 : c.duration('wait', merged.wait, 0, { positive: true }),
    retryableStatuses: c.statusList('retryableStatuses', merged.retryableStatuses, base.retryableStatuses),
    storeServerErrors: c.boolean('storeServerErrors', merged.storeServerErrors, base.storeServerErrors),
    transaction: c.transaction('', merged, base.transaction),
  };
  c.rejectUnknownKeys();
  if (c.problems.length > 0) throw new IdempotencyConfigError(c.problems.map((p) => `@Idempotent() on ${where}: ${p}`));
  return r;
}
