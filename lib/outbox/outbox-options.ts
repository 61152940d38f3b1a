import { MAX_TIMER_MS } from '../utils/long-timer';
import type { Checker } from '../utils/validate-options';
import type { ResolvedOutboxOptions, ResolvedOutboxTarget } from './outbox.interfaces';

const DEFAULT_DELIVERY_TIMEOUT_MS = 30_000;
/** The relay times a delivery with one Node timer, which cannot wait longer. */
const TIMER_LIMIT = { ms: MAX_TIMER_MS, why: 'the relay times each delivery with a Node timer, which cannot wait longer' };

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Validates the `outbox` option; undefined when the app does not use the outbox. */
export function resolveOutbox(c: Checker, value: unknown, hasRedis: boolean): ResolvedOutboxOptions | undefined {
  if (value === undefined || value === false) return undefined;
  if (!isObject(value)) {
    c.fail('outbox', 'expected { topics: { "order.created": { to: "bullmq", queue: "orders" } | { to: "handler" } }, relay?, retention?, maxAttempts?, backoff? }');
    return undefined;
  }
  const o = c.track('outbox', value);
  const deliveryTimeoutMs = c.duration('outbox.deliveryTimeout', o.deliveryTimeout, DEFAULT_DELIVERY_TIMEOUT_MS, { positive: true, max: TIMER_LIMIT });
  const topics = new Map<string, ResolvedOutboxTarget>();
  if (!isObject(o.topics) || Object.keys(o.topics).length === 0) {
    c.fail('outbox.topics', 'expected at least one topic, e.g. { "order.created": { to: "bullmq", queue: "orders" } }');
  } else {
    for (const [topic, raw] of Object.entries(o.topics)) topics.set(topic, resolveTopic(c, `outbox.topics.${topic}`, raw, hasRedis, deliveryTimeoutMs));
  }
  const relay = c.track('outbox.relay', isObject(o.relay) ? o.relay : {});
  if (o.relay !== undefined && !isObject(o.relay)) c.fail('outbox.relay', 'expected { enabled?, batchSize?, pollInterval?, concurrency? }');
  const backoff = c.track('outbox.backoff', isObject(o.backoff) ? o.backoff : {});
  if (o.backoff !== undefined && !isObject(o.backoff)) c.fail('outbox.backoff', 'expected { type?: "exponential" | "fixed", delay?, maxDelay? }');
  const type = backoff.type ?? 'exponential';
  if (type !== 'exponential' && type !== 'fixed') c.fail('outbox.backoff.type', `expected "exponential" or "fixed", got ${JSON.stringify(type)}`);
  return {
    topics,
    relay: {
      enabled: c.boolean('outbox.relay.enabled', relay.enabled, true),
      batchSize: c.positiveInt('outbox.relay.batchSize', relay.batchSize, 100),
      pollIntervalMs: c.duration('outbox.relay.pollInterval', relay.pollInterval, 1000, { positive: true }),
      concurrency: c.positiveInt('outbox.relay.concurrency', relay.concurrency, 2),
    },
    retentionMs: c.duration('outbox.retention', o.retention, 7 * 86_400_000),
    maxAttempts: c.positiveInt('outbox.maxAttempts', o.maxAttempts, 10),
    backoff: {
      factor: type === 'fixed' ? 1 : 2,
      delayMs: c.duration('outbox.backoff.delay', backoff.delay, 1000),
      maxDelayMs: c.duration('outbox.backoff.maxDelay', backoff.maxDelay, 300_000),
    },
    deadBlocksKey: c.boolean('outbox.deadBlocksKey', o.deadBlocksKey, true),
    deliveryTimeoutMs,
  };
}

function resolveTopic(c: Checker, option: string, raw: unknown, hasRedis: boolean, deliveryTimeoutMs: number): ResolvedOutboxTarget {
  if (!isObject(raw)) {
    c.fail(option, 'expected { to: "bullmq", queue: "name" } or { to: "handler", timeout? }');
    return { to: 'handler', timeoutMs: deliveryTimeoutMs };
  }
  const t = c.track(option, raw);
  if (t.to === 'handler') return { to: 'handler', timeoutMs: c.duration(`${option}.timeout`, t.timeout, deliveryTimeoutMs, { positive: true, max: TIMER_LIMIT }) };
  if (t.to !== 'bullmq') {
    c.fail(`${option}.to`, `expected "bullmq" or "handler", got ${JSON.stringify(t.to)}`);
    return { to: 'handler', timeoutMs: deliveryTimeoutMs };
  }
  if (!hasRedis) c.fail(option, 'the bullmq target needs Redis: set the `redis` option, or deliver this topic with { to: "handler" }');
  if (typeof t.queue !== 'string' || t.queue.length === 0 || t.queue.includes(':')) {
    c.fail(`${option}.queue`, `expected a BullMQ queue name without ":", got ${JSON.stringify(t.queue)}`);
  }
  if (t.prefix !== undefined && (typeof t.prefix !== 'string' || t.prefix.length === 0)) c.fail(`${option}.prefix`, 'expected a non-empty BullMQ key prefix');
  return { to: 'bullmq', queue: String(t.queue), prefix: t.prefix as string | undefined };
}
