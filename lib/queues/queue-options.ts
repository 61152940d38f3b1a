import type { Checker } from '../utils/validate-options';
import type { ResolvedQueueOptions } from './queue-options.interfaces';

/** BullMQ's highest priority number (the lowest priority); 1 is the highest. */
export const MAX_PRIORITY = 2_097_152;

const RATE = /^(\d+)\s*\/\s*(s|sec|second|m|min|minute|h|hour)$/;
const WINDOW_MS: Record<string, number> = { s: 1000, sec: 1000, second: 1000, m: 60_000, min: 60_000, minute: 60_000, h: 3_600_000, hour: 3_600_000 };

/** Parses `"100/s"`, `"20/min"`, `"5/h"` into BullMQ limiter settings, or explains what is accepted. */
export function parseRate(value: unknown): { max: number; durationMs: number } | { error: string } {
  const match = typeof value === 'string' ? RATE.exec(value.trim()) : null;
  const max = match ? Number(match[1]) : 0;
  if (!match || max < 1) {
    return { error: `expected a rate such as "100/s", "20/min" or "5/h" (a whole number of at least 1, then /s, /sec, /min, /m, /h or /hour), got ${JSON.stringify(value)}` };
  }
  return { max, durationMs: WINDOW_MS[match[2]] };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Validates the `queues` option: `{ [queue]: { retention?, rateLimit?, concurrency?, priority? } }`. */
export function resolveQueues(c: Checker, value: unknown): Record<string, ResolvedQueueOptions> {
  if (value === undefined) return {};
  if (!isObject(value)) {
    c.fail('queues', 'expected an object of queue name to settings, e.g. { payments: { rateLimit: "100/s", concurrency: 5 } }');
    return {};
  }
  const resolved: Record<string, ResolvedQueueOptions> = {};
  for (const [name, given] of Object.entries(value)) {
    const option = `queues.${name}`;
    if (!isObject(given)) {
      c.fail(option, 'expected { retention?, rateLimit?, concurrency?, priority? }');
      continue;
    }
    const o = c.track(option, given);
    const queue: ResolvedQueueOptions = {};
    if (o.retention !== undefined) queue.retentionMs = c.duration(`${option}.retention`, o.retention, 0);
    if (o.rateLimit !== undefined) {
      const rate = parseRate(o.rateLimit);
      if ('error' in rate) c.fail(`${option}.rateLimit`, rate.error);
      else queue.rateLimit = rate;
    }
    if (o.concurrency !== undefined) queue.concurrency = c.positiveInt(`${option}.concurrency`, o.concurrency, 1);
    if (o.priority !== undefined) {
      if (typeof o.priority !== 'number' || !Number.isInteger(o.priority) || o.priority < 1 || o.priority > MAX_PRIORITY) {
        c.fail(`${option}.priority`, `expected a whole number from 1 (highest) to ${MAX_PRIORITY} (lowest), got ${JSON.stringify(o.priority)}`);
      } else queue.priority = o.priority;
    }
    resolved[name] = queue;
  }
  return resolved;
}
