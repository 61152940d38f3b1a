import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve, sep } from 'node:path';

/**
 * The default BullMQ prefix of an application's queues: a hash of the Postgres database name, the schema and the
 * application's name. It never includes a server address, so it stays the same behind proxies and after failover;
 * two applications (or two databases, or two schemas) on one Redis never share queues.
 */
export function derivedQueuePrefix(database: string, schema: string, app: string): string {
  const hash = createHash('sha1').update(JSON.stringify([database, schema, app])).digest('hex').slice(0, 12);
  return `idem-wf-${hash}`;
}

/** Where the default app name came from: the package.json read, or none. */
export interface AppNameSource {
  name: string;
  /** The package.json the name was read from; undefined when none was found (the name is then ''). */
  from?: string;
}

/**
 * This application's name: `name` of the package.json in the working directory; without one there, of the nearest
 * package.json above the entry script (outside node_modules), so that an instance started from another directory
 * (systemd, a process manager, `node /srv/app/dist/main.js` run from `/`) finds the same name; '' when neither has one.
 */
export function defaultAppName(cwd = process.cwd(), entry: string | undefined = process.argv[1]): AppNameSource {
  const here = packageNameIn(cwd);
  if (here) return here;
  if (entry) {
    let dir = dirname(resolve(cwd, entry));
    // A launcher inside node_modules (jest, a process manager) is not the application.
    const modules = dir.split(sep).indexOf('node_modules');
    if (modules >= 0) dir = dir.split(sep).slice(0, modules).join(sep) || sep;
    for (;;) {
      const found = packageNameIn(dir);
      if (found) return found;
      const parent = dirname(dir);
      if (parent === dir) break;
      dir = parent;
    }
  }
  return { name: '' };
}

function packageNameIn(dir: string): AppNameSource | undefined {
  const file = join(dir, 'package.json');
  try {
    const { name } = JSON.parse(readFileSync(file, 'utf8')) as { name?: unknown };
    return typeof name === 'string' && name.length > 0 ? { name, from: file } : undefined;
  } catch {
    return undefined;
  }
}

/** True when a BullMQ prefix carries a Redis Cluster hash tag (`{…}` with something inside). */
export function hasHashTag(prefix: string): boolean {
  return /\{[^}]+\}/.test(prefix);
}

/** The part of a key Redis Cluster hashes to find its slot: the hash tag when the key has one, else the whole key. */
export function slotKeyOf(key: string): string {
  const open = key.indexOf('{');
  const close = open < 0 ? -1 : key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : key;
}

/**
 * The prefix of one queue. On a Redis Cluster every key of a queue must sit in one slot: a prefix without a hash tag
 * becomes `{<prefix>:<queue>}`, so each queue gets its own slot (BullMQ's rule); elsewhere the prefix is shared.
 */
export function queuePrefixOf(prefix: string, queue: string, cluster: boolean): string {
  return cluster && !hasHashTag(prefix) ? `{${prefix}:${queue}}` : prefix;
}
