import { createHash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { CompletedRecord } from '../../core/idempotency-record';
import { CacheLookup, IdempotencyCache } from '../idempotency.cache';
import { CallBatcher } from '../call-batcher';
import { CircuitBreaker } from './circuit-breaker';

// KEYS[1] record, KEYS[2] in-flight marker; ARGV[1] fingerprint, ARGV[2] lease ms.
// Returns {1, record} on a cached outcome, {2, fingerprint} when in flight, {0} after marking in flight.
const LOOKUP = `
local rec = redis.call('GET', KEYS[1])
if rec then return {1, rec} end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {0} end
local fp = redis.call('GET', KEYS[2])
if fp then return {2, fp} end
return {0}`;

// The lookups of one turn of the event loop, each answered as LOOKUP answers it alone, in order: KEYS[2i-1] record,
// KEYS[2i] marker, ARGV[2i-1] fingerprint, ARGV[2i] lease ms. A record already returned to an earlier lookup of this
// call is answered {3, that lookup's number} instead of being sent again (nothing in here writes a record).
const LOOKUP_MANY = `
local out, hit = {}, {}
for i = 1, #KEYS / 2 do
  local rk, mk = KEYS[2 * i - 1], KEYS[2 * i]
  if hit[rk] then
    out[i] = {3, hit[rk]}
  else
    local rec = redis.call('GET', rk)
    if rec then
      hit[rk] = i
      out[i] = {1, rec}
    elseif redis.call('SET', mk, ARGV[2 * i - 1], 'NX', 'PX', ARGV[2 * i]) then
      out[i] = {0}
    else
      local fp = redis.call('GET', mk)
      if fp then out[i] = {2, fp} else out[i] = {0} end
    end
  end
end
return out`;

// KEYS[1] record, KEYS[2] in-flight marker; ARGV[1] record JSON, ARGV[2] ttl ms.
const REMEMBER = `
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('DEL', KEYS[2])
return 1`;

interface Script {
  text: string;
  sha: string;
}

function script(text: string): Script {
  return { text, sha: createHash('sha1').update(text).digest('hex') };
}

interface CachedRecord {
  f: string;
  r: unknown;
  e: number;
}

function toRecord(json: string): CompletedRecord {
  const cached = JSON.parse(json) as CachedRecord;
  return { fingerprint: cached.f, result: cached.r, expiresAt: cached.e };
}

/** One lookup: the key's scope and key, the request's fingerprint and lease. */
interface Lookup {
  scope: string;
  key: string;
  fingerprint: string;
  leaseMs: number;
}

/** A script's answer to one lookup: {1, record} cached, {2, fingerprint} in flight, {0} marked for the caller. */
type LookupReply = [number, string?];

function toLookup(reply: LookupReply): CacheLookup {
  if (reply[0] === 1 && reply[1]) return { kind: 'hit', record: toRecord(reply[1]) };
  if (reply[0] === 2 && reply[1] !== undefined) return { kind: 'busy', fingerprint: reply[1] };
  return { kind: 'miss' };
}

/**
 * The Redis cache: completed records live under `<prefix>:{scope|key}:r` until they expire,
 * in-flight markers under `<prefix>:{scope|key}:f` for one lease. Every call goes through a
 * circuit breaker with a short timeout; on any failure it answers `miss` so Postgres decides.
 * The lookups made in one turn of the event loop go to Redis as one script, and the peeks as one MGET (on a
 * standalone Redis: on a Cluster the keys of one command must share a slot, so each goes alone), as the store's
 * reads share one statement. Each call still passes the breaker on its own: a batch that fails counts once per call
 * in it, as the same calls sent one by one, all in flight when Redis failed, would have.
 */
export class RedisIdempotencyCache extends IdempotencyCache {
  private readonly lookupScript = script(LOOKUP);
  private readonly lookupManyScript = script(LOOKUP_MANY);
  private readonly lookups = new CallBatcher<Lookup, CacheLookup>(
    (batch) => this.lookupTogether(batch),
    (one) => this.lookupAlone(one),
  );
  /** The peeks of one turn (the transactional mode's read before its claim) as one MGET of their record keys. */
  private readonly peeks = new CallBatcher<string, string | null>(
    (recordKeys) => this.redis.mget(...recordKeys),
    (recordKey) => this.redis.get(recordKey),
  );

  constructor(
    private readonly connection: { readonly redis?: Redis | Cluster; readonly redisKeyPrefix: string },
    private readonly breaker: CircuitBreaker,
  ) {
    super();
  }

  lookup(scope: string, key: string, fingerprint: string, leaseMs: number): Promise<CacheLookup> {
    const one: Lookup = { scope, key, fingerprint, leaseMs };
    return this.breaker.run(() => (this.redis.isCluster ? this.lookupAlone(one) : this.lookups.call(one)), { kind: 'miss' } as const);
  }

  private async lookupAlone({ scope, key, fingerprint, leaseMs }: Lookup): Promise<CacheLookup> {
    return toLookup((await this.eval(this.lookupScript, this.keys(scope, key), [fingerprint, String(leaseMs)])) as LookupReply);
  }

  private async lookupTogether(batch: Lookup[]): Promise<CacheLookup[]> {
    const keys = batch.flatMap((l) => this.keys(l.scope, l.key));
    const args = batch.flatMap((l) => [l.fingerprint, String(l.leaseMs)]);
    const replies = (await this.eval(this.lookupManyScript, keys, args)) as Array<[number, string | number | undefined]>;
    // {3, n}: the record of the n-th lookup (a hit), parsed again for this one
    return replies.map((reply) => toLookup((reply[0] === 3 ? replies[Number(reply[1]) - 1] : reply) as LookupReply));
  }

  override peek(scope: string, key: string): Promise<CompletedRecord | undefined> {
    return this.breaker.run(async () => {
      const recordKey = this.keys(scope, key)[0];
      const reply = await (this.redis.isCluster ? this.redis.get(recordKey) : this.peeks.call(recordKey));
      return reply === null ? undefined : toRecord(reply);
    }, undefined);
  }

  async remember(scope: string, key: string, record: CompletedRecord): Promise<void> {
    const ttl = record.expiresAt - Date.now();
    if (ttl <= 0) return this.forget(scope, key);
    const value: CachedRecord = { f: record.fingerprint, r: record.result, e: record.expiresAt };
    const [recordKey, markerKey] = this.keys(scope, key);
    // EVAL with the script's text, not EVALSHA: one command, on the connection before the caller goes on (the
    // response to a first-time key is sent right after it, see the interceptor), and ahead of every later command
    // there. EVALSHA could answer NOSCRIPT (after a Redis restart or SCRIPT FLUSH) and be sent again, behind a retry's
    // lookup already queued: a 409 for a key that is done. MULTI/SET/DEL/EXEC would keep the order too, but costs
    // the app about four times the CPU of one EVAL (ioredis builds a pipeline per transaction).
    await this.breaker.run(() => this.redis.eval(REMEMBER, 2, recordKey, markerKey, JSON.stringify(value), String(ttl)), undefined);
  }

  async forget(scope: string, key: string): Promise<void> {
    await this.breaker.run(() => this.redis.del(this.keys(scope, key)[1]), 0);
  }

  async touch(scope: string, key: string, leaseMs: number): Promise<void> {
    await this.breaker.run(() => this.redis.pexpire(this.keys(scope, key)[1], leaseMs), 0);
  }

  private get redis(): Redis | Cluster {
    const redis = this.connection.redis;
    if (!redis) throw new Error('Redis is not connected');
    return redis;
  }

  private keys(scope: string, key: string): [string, string] {
    // The hash tag keeps both keys in one Redis Cluster slot, as the lookup script and MULTI require; the scope's
    // length makes the tag unambiguous whatever characters the scope and the client's key contain.
    const tag = `${this.connection.redisKeyPrefix}:{${scope.length}:${scope}|${key}}`;
    return [`${tag}:r`, `${tag}:f`];
  }

  private async eval(s: Script, keys: string[], args: string[]): Promise<unknown> {
    try {
      return await this.redis.evalsha(s.sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (err instanceof Error && err.message.startsWith('NOSCRIPT')) {
        return this.redis.eval(s.text, keys.length, ...keys, ...args);
      }
      throw err;
    }
  }
}
