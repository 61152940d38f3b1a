import { LibraryLogger } from '../observability/library-logger';
import { KeyRecords } from '../console/key-records';
import { IdempotencyConnections } from '../storage/idempotency-connections';
import { CircuitBreaker } from '../storage/redis/circuit-breaker';
import { RedisIdempotencyCache } from '../storage/redis/redis-idempotency.cache';
import { loadPeer } from '../utils/optional-peer';
import { PostgresWorkflowStore } from '../workflow/storage/postgres-workflow.store';
import type { WorkflowStatus } from '../workflow/workflow.interfaces';
import type { CommandResult } from './migrate-command';

export const CONSOLE_USAGE = `Usage: nestjs-idempotency <command> [--url <postgres-url>] [--schema <name>]

  workflows list [--status <s>] [--workflow <name>] [--since <ISO time>] [--limit <n>]
  workflows show <execution id>            one execution: its steps, events, messages and waits
  workflows cancel <workflow id>           the running step finishes, no further step starts
  workflows resume <workflow id>           a failed or cancelled execution goes back to pending; a running
                                           app's reconciler picks it up within workflows.recoveryInterval
  keys show <scope> <key>                  the records of a key (scopes: http:<scope>, method:<scope>, …)
  keys release <scope> <key>               release a key stuck in progress (the next request runs); with Redis
                                           (--redis or $REDIS_URL) its in-flight marker is cleared too, else
                                           the cache keeps answering "in progress" until the holder's lease ends
  --url            Postgres URL (default: $DATABASE_URL)
  --schema         schema of the library's tables (default: $IDEMPOTENCY_SCHEMA, else public)
  --redis          Redis URL of the app's cache (default: $REDIS_URL)
  --redis-prefix   the app's redis.keyPrefix, when it sets one (default: derived as the app does)

Output is JSON. Exit 0 done, 1 not found / nothing to do, 2 usage error.`;

const STATUSES = new Set(['pending', 'running', 'completed', 'failed', 'cancelled', 'timed_out']);
const FLAGS = new Set(['--url', '--schema', '--status', '--workflow', '--since', '--limit', '--redis', '--redis-prefix']);

interface Parsed {
  words: string[];
  flags: Map<string, string>;
}

function parse(args: string[]): Parsed | string {
  const parsed: Parsed = { words: [], flags: new Map() };
  for (let i = 0; i < args.length; i++) {
    if (!args[i].startsWith('--')) {
      parsed.words.push(args[i]);
      continue;
    }
    const [flag, inline] = args[i].split(/=(.*)/s, 2);
    if (!FLAGS.has(flag)) return `unknown option "${args[i]}"`;
    const value = inline ?? args[++i];
    if (value === undefined || value === '') return `${flag} needs a value`;
    parsed.flags.set(flag, value);
  }
  return parsed;
}

const usage = (message: string): CommandResult => ({ code: 2, out: [], err: [`nestjs-idempotency: ${message}`, CONSOLE_USAGE] });
const print = (value: unknown, code = 0): CommandResult => ({ code, out: [JSON.stringify(value, null, 2)], err: [] });

/** `nestjs-idempotency workflows …|keys …`: the console's operations from a shell, on the app's database. */
export async function consoleCommand(args: string[], env: NodeJS.ProcessEnv): Promise<CommandResult> {
  if (args.includes('--help') || args.includes('-h')) return { code: 0, out: [CONSOLE_USAGE], err: [] };
  const parsed = parse(args);
  if (typeof parsed === 'string') return usage(parsed);
  const [group, action, ...operands] = parsed.words;
  const url = parsed.flags.get('--url') ?? env.DATABASE_URL;
  if (!url || !/^postgres(ql)?:\/\//.test(url)) return usage('give the database as --url postgres://… or in DATABASE_URL');
  const schema = parsed.flags.get('--schema') ?? env.IDEMPOTENCY_SCHEMA ?? 'public';
  const wanted = group === 'keys' ? 2 : action === 'list' ? 0 : 1;
  const known = group === 'keys' ? ['show', 'release'] : group === 'workflows' ? ['list', 'show', 'cancel', 'resume'] : [];
  if (!known.includes(action)) return usage(`unknown command "${[group, action].filter(Boolean).join(' ')}"`);
  if (operands.length !== wanted) return usage(`${group} ${action} takes ${wanted} argument(s)`);

  const { Pool } = loadPeer('pg', 'the CLI');
  const pool = new Pool({ connectionString: url, max: 1 });
  try {
    if (group === 'keys') {
      const records = new KeyRecords({ pool, schema });
      const [scope, key] = operands;
      if (action === 'show') {
        const found = await records.show(scope, key);
        return print(found, found.length === 0 ? 1 : 0);
      }
      const released = await records.release(scope, key);
      const redisUrl = parsed.flags.get('--redis') ?? env.REDIS_URL;
      if (released && redisUrl) await forgetInRedis(redisUrl, parsed.flags.get('--redis-prefix') ?? (await IdempotencyConnections.derivedKeyPrefix(pool, schema)), scope, key);
      return print({ released }, released ? 0 : 1);
    }
    const store = new PostgresWorkflowStore({ pool, schema, preparedStatements: false }, 0);
    switch (action) {
      case 'list': {
        const status = parsed.flags.get('--status');
        if (status !== undefined && !STATUSES.has(status)) return usage(`--status must be one of ${[...STATUSES].join(', ')}`);
        const since = parsed.flags.get('--since');
        const sinceDate = since === undefined ? undefined : new Date(since);
        if (sinceDate && Number.isNaN(sinceDate.getTime())) return usage('--since must be an ISO time, e.g. 2026-01-31T12:00:00Z');
        const limit = Number(parsed.flags.get('--limit') ?? 100);
        if (!Number.isInteger(limit) || limit < 1 || limit > 1000) return usage('--limit must be an integer from 1 to 1000');
        const listed = await store.list({ status: status as WorkflowStatus | undefined, workflow: parsed.flags.get('--workflow'), limit: sinceDate ? 1000 : limit });
        return print(listed.filter((e) => !sinceDate || e.createdAt >= sinceDate).slice(0, limit));
      }
      case 'show': {
        const execution = await store.get(operands[0]);
        if (!execution) return { code: 1, out: [], err: [`no execution ${operands[0]}`] };
        const [steps, activity] = await Promise.all([store.steps(operands[0]), store.activity(operands[0])]);
        return print({ execution, steps, ...activity });
      }
      case 'cancel': {
        const cancelled = await store.cancel(operands[0]);
        return print({ cancelled: cancelled !== null, execution: cancelled }, cancelled ? 0 : 1);
      }
      default: {
        const latest = await store.latest(operands[0]);
        if (latest?.status !== 'failed' && latest?.status !== 'cancelled') {
          return { code: 1, out: [], err: [`workflow id "${operands[0]}" has no failed or cancelled execution to resume (${latest?.status ?? 'none'})`] };
        }
        const resumed = await store.resume(latest.executionId);
        return print({ resumed: resumed !== null, execution: resumed?.execution ?? null }, resumed ? 0 : 1);
      }
    }
  } finally {
    await pool.end();
  }
}

/** Clears the key's in-flight marker in the app's Redis cache (the same code the app uses). */
async function forgetInRedis(url: string, redisKeyPrefix: string, scope: string, key: string): Promise<void> {
  const { default: Redis } = loadPeer('ioredis', 'keys release --redis');
  const redis = new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: true });
  try {
    await redis.connect();
    const breaker = new CircuitBreaker('Redis', { failureThreshold: 1, resetAfterMs: 1, timeoutMs: 5_000 }, new LibraryLogger('Idempotency'));
    await new RedisIdempotencyCache({ redis, redisKeyPrefix }, breaker).forget(scope, key);
  } finally {
    redis.disconnect();
  }
}
