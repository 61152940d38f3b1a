import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The default BullMQ prefix of an application's queues: a hash of the Postgres database name, the schema and the
 * application's name. It never includes a server address, so it stays the same behind proxies and after failover;
 * two applications (or two databases, or two schemas) on one Redis never share queues.
 */
export function derivedQueuePrefix(database: string, schema: string, app: string): string {
  const hash = createHash('sha1').update(JSON.stringify([database, schema, app])).digest('hex').slice(0, 12);
  return `idem-wf-${hash}`;
}

/** This application's name: `name` of the package.json in the working directory, or '' when there is none. */
export function defaultAppName(cwd = process.cwd()): string {
  try {
    const { name } = JSON.parse(readFileSync(join(cwd, 'package.json'), 'utf8')) as { name?: unknown };
    return typeof name === 'string' ? name : '';
  } catch {
    return '';
  }
}

/** True when a BullMQ prefix carries a Redis Cluster hash tag (`{…}` with something inside). */
export function hasHashTag(prefix: string): boolean {
  return /\{[^}]+\}/.test(prefix);
}

/**
 * The prefix of one queue. On a Redis Cluster every key of a queue must sit in one slot: a prefix without a hash tag
 * becomes `{<prefix>:<queue>}`, so each queue gets its own slot (BullMQ's rule); elsewhere the prefix is shared.
 */
export function queuePrefixOf(prefix: string, queue: string, cluster: boolean): string {
  return cluster && !hasHashTag(prefix) ? `{${prefix}:${queue}}` : prefix;
}
