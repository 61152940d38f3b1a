import { randomUUID } from 'node:crypto';
import { Claim, ClaimOutcome, ClaimRequest, CompletedRecord, RecordStatus } from '../../core/idempotency-record';
import { IdempotencyStore } from '../idempotency.store';
import { fromJson, slot, toJson } from './memory-support';

interface MemoryRecord {
  id: string;
  fingerprint: string;
  status: RecordStatus;
  token: string;
  lockedUntil: number | null;
  expiresAt: number;
  /** The claim's ttl: a completed outcome lives this long from its completion, as in Postgres. */
  ttlMs: number;
  /** The outcome as JSON text, as Postgres keeps it in a jsonb column: callers never share the stored object. */
  result: string | null;
  error: string | null;
  attempts: number;
  completedAt: number | null;
}

/**
 * The in-memory store of `IdempotencyTestingModule`: the Postgres store's rules in one process, for unit tests.
 * One active record per (scope, key), like the partial unique index: a claim takes a new, expired or dead-lease key
 * (a dead holder's key only for the same request), reports a live one, and every later change is compare-and-set on
 * the claim's token. Released records are kept apart so they never block a claim. Time is `Date.now()`, so Jest's
 * fake timers move leases and TTLs too.
 */
export class MemoryIdempotencyStore extends IdempotencyStore {
  private readonly active = new Map<string, MemoryRecord>();
  private readonly released = new Map<string, MemoryRecord[]>();
  private nextId = 1;

  claim(request: ClaimRequest): Promise<ClaimOutcome> {
    const now = Date.now();
    const id = slot(request.scope, request.key);
    const current = this.active.get(id);
    if (current && isLive(current, now, request.fingerprint)) return Promise.resolve(outcomeOf(current));
    const token = randomUUID();
    const record: MemoryRecord = {
      id: current?.id ?? String(this.nextId++),
      fingerprint: request.fingerprint,
      status: 'in_progress',
      token,
      lockedUntil: now + request.leaseMs,
      expiresAt: now + request.ttlMs,
      ttlMs: request.ttlMs,
      result: null,
      error: null,
      attempts: (current?.attempts ?? 0) + 1,
      completedAt: null,
    };
    this.active.set(id, record);
    const { scope, key, fingerprint, leaseMs } = request;
    return Promise.resolve({ kind: 'acquired', claim: { id: record.id, scope, key, fingerprint, token, leaseMs }, takenOver: current !== undefined });
  }

  complete(claim: Claim, result: unknown): Promise<CompletedRecord | null> {
    const record = this.held(claim);
    if (!record) return Promise.resolve(null);
    const now = Date.now();
    Object.assign(record, { status: 'completed', result: toJson(result), lockedUntil: null, completedAt: now, expiresAt: now + record.ttlMs });
    return Promise.resolve({ fingerprint: claim.fingerprint, result, expiresAt: record.expiresAt });
  }

  release(claim: Claim, error?: unknown): Promise<void> {
    const record = this.held(claim);
    if (record) {
      Object.assign(record, { status: 'failed', error: error === undefined ? null : toJson(error), lockedUntil: null, completedAt: Date.now() });
      const id = slot(claim.scope, claim.key);
      this.active.delete(id);
      this.released.set(id, [...(this.released.get(id) ?? []), record]);
    }
    return Promise.resolve();
  }

  extendLease(claim: Claim): Promise<boolean> {
    const record = this.held(claim);
    if (record) record.lockedUntil = Date.now() + claim.leaseMs;
    return Promise.resolve(record !== undefined);
  }

  recentFailure(scope: string, key: string, withinMs: number): Promise<unknown> {
    const since = Date.now() - Math.ceil(withinMs);
    const failures = (this.released.get(slot(scope, key)) ?? []).filter((r) => r.status === 'failed' && r.error !== null && (r.completedAt ?? 0) >= since);
    const newest = failures.sort((a, b) => (b.completedAt ?? 0) - (a.completedAt ?? 0))[0];
    return Promise.resolve(newest ? fromJson(newest.error) : undefined);
  }

  find(scope: string, key: string): Promise<ClaimOutcome | null> {
    const record = this.active.get(slot(scope, key));
    return Promise.resolve(record && isLive(record, Date.now(), record.fingerprint) ? outcomeOf(record) : null);
  }

  /**
   * Removes what retention would: records past their TTL whose lease is not held, and released records older than
   * `releasedMs`. Returns how many went.
   */
  prune(releasedMs: number): number {
    const now = Date.now();
    let removed = 0;
    for (const [id, record] of this.active) {
      if (record.expiresAt <= now && !(record.lockedUntil !== null && record.lockedUntil > now)) {
        this.active.delete(id);
        removed++;
      }
    }
    for (const [id, records] of this.released) {
      const kept = records.filter((r) => (r.completedAt ?? 0) > now - releasedMs);
      removed += records.length - kept.length;
      if (kept.length === 0) this.released.delete(id);
      else this.released.set(id, kept);
    }
    return removed;
  }

  /** Forgets every record (between tests). */
  clear(): void {
    this.active.clear();
    this.released.clear();
  }

  private held(claim: Claim): MemoryRecord | undefined {
    const record = this.active.get(slot(claim.scope, claim.key));
    return record && record.id === claim.id && record.token === claim.token && record.status === 'in_progress' ? record : undefined;
  }
}

/**
 * The Postgres store's LIVE_PREDICATE: a held lease (whatever the TTL), a dead holder's claim for another request
 * (reported so that the mismatch shows), or a completed outcome within its TTL.
 */
function isLive(record: MemoryRecord, now: number, fingerprint: string): boolean {
  if (record.status === 'in_progress') {
    return (record.lockedUntil !== null && record.lockedUntil > now) || (record.expiresAt > now && record.fingerprint !== fingerprint);
  }
  return record.status === 'completed' && record.expiresAt > now;
}

function outcomeOf(record: MemoryRecord): ClaimOutcome {
  if (record.status === 'completed') {
    return { kind: 'completed', record: { fingerprint: record.fingerprint, result: fromJson(record.result), expiresAt: record.expiresAt } };
  }
  return { kind: 'in_progress', fingerprint: record.fingerprint, lockedUntil: record.lockedUntil ?? 0 };
}
