import { randomUUID } from 'node:crypto';
import type { BeginResult, Claim, ClaimRequest } from '../../lib';
import { waitUntil } from '../support/resilience';
import { bootForSuite, IMPLEMENTATIONS } from './implementations';

function claimOf(result: BeginResult): Claim {
  if (result.kind !== 'acquired') throw new Error(`expected to acquire the key, got ${result.kind}`);
  return result.claim;
}

/** A request for a fresh key; leases and TTLs long unless a case shortens them. */
function fresh(overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return { scope: 'contract', key: randomUUID(), fingerprint: 'fp-a', leaseMs: 30_000, ttlMs: 60_000, ...overrides };
}

/** A lease short enough to run out during a test; the cases poll for its end instead of sleeping a fixed time. */
const SHORT_MS = 300;

describe.each(IMPLEMENTATIONS)('IdempotencyStore contract: $name', (implementation) => {
  const s = bootForSuite(implementation);

  it('claim: the first caller acquires the key; the live record is in progress under its fingerprint', async () => {
    const req = fresh();
    const claim = claimOf(await s.service.begin(req));
    expect(claim).toMatchObject({ scope: req.scope, key: req.key, fingerprint: 'fp-a', leaseMs: req.leaseMs });
    const found = await s.store.find(req.scope, req.key);
    expect(found).toMatchObject({ kind: 'in_progress', fingerprint: 'fp-a' });
    expect(found?.kind === 'in_progress' && found.lockedUntil).toBeGreaterThan(Date.now());
  });

  it('in progress: a duplicate with the same request is told to retry, and does not acquire', async () => {
    const req = fresh();
    claimOf(await s.service.begin(req));
    const duplicate = await s.service.begin(req);
    expect(duplicate.kind).toBe('in_progress');
    expect(duplicate.kind === 'in_progress' && duplicate.retryAfterMs).toBeGreaterThan(0);
    expect(await s.store.claim(req)).toMatchObject({ kind: 'in_progress', fingerprint: 'fp-a' });
  });

  it('replay: after completion the same request gets the stored result (a JSON copy), from the store too', async () => {
    const req = fresh();
    const claim = claimOf(await s.service.begin(req));
    const at = new Date('2026-01-02T03:04:05.000Z');
    await expect(s.service.complete(claim, { ok: true, at, nested: [1, { b: 2 }] })).resolves.toBe(true);
    const stored = { ok: true, at: at.toISOString(), nested: [1, { b: 2 }] };
    expect(await s.service.begin(req)).toMatchObject({ kind: 'replay', record: { fingerprint: 'fp-a', result: stored } });
    expect(await s.store.claim(req)).toMatchObject({ kind: 'completed', record: { fingerprint: 'fp-a', result: stored } });
    expect(await s.store.find(req.scope, req.key)).toMatchObject({ kind: 'completed', record: { result: stored } });
  });

  it('cache peek: reads a cached outcome and marks nothing; a key in flight or unknown reads as nothing', async () => {
    const req = fresh();
    expect(await s.cache.peek(req.scope, req.key)).toBeUndefined();
    const claim = claimOf(await s.service.begin(req));
    expect(await s.cache.peek(req.scope, req.key)).toBeUndefined();
    await s.service.complete(claim, 'done');
    expect(await s.cache.peek(req.scope, req.key)).toMatchObject({ fingerprint: 'fp-a', result: 'done' });
    const other = fresh();
    expect(await s.cache.peek(other.scope, other.key)).toBeUndefined();
    // peek marked nothing: the next lookup misses (and marks the key in flight) instead of finding it busy
    expect(await s.cache.lookup(other.scope, other.key, 'fp-a', 30_000)).toEqual({ kind: 'miss' });
    expect(await s.cache.lookup(other.scope, other.key, 'fp-a', 30_000)).toEqual({ kind: 'busy', fingerprint: 'fp-a' });
  });

  it('mismatch: another request under a completed or held key is refused, and the record stays', async () => {
    const done = fresh();
    await s.service.complete(claimOf(await s.service.begin(done)), 'first');
    expect((await s.service.begin({ ...done, fingerprint: 'fp-b' })).kind).toBe('mismatch');
    expect(await s.service.begin(done)).toMatchObject({ kind: 'replay', record: { result: 'first' } });

    const held = fresh();
    claimOf(await s.service.begin(held));
    expect((await s.service.begin({ ...held, fingerprint: 'fp-b' })).kind).toBe('mismatch');
    expect(await s.store.find(held.scope, held.key)).toMatchObject({ kind: 'in_progress', fingerprint: 'fp-a' });
  });

  it('scopes: the same key in two scopes is two records', async () => {
    const req = fresh();
    await s.service.complete(claimOf(await s.service.begin(req)), 'scope one');
    const other = claimOf(await s.service.begin({ ...req, scope: 'contract-other', fingerprint: 'fp-b' }));
    await s.service.complete(other, 'scope two');
    expect(await s.service.begin(req)).toMatchObject({ kind: 'replay', record: { result: 'scope one' } });
    expect(await s.service.begin({ ...req, scope: 'contract-other', fingerprint: 'fp-b' })).toMatchObject({ kind: 'replay', record: { result: 'scope two' } });
  });

  it('lease expiry: a holder that stops renewing is taken over by the same request, never before its lease ends', async () => {
    const req = fresh({ leaseMs: SHORT_MS });
    const first = claimOf(await s.service.begin(req));
    const held = await s.store.find(req.scope, req.key);
    const lockedUntil = held?.kind === 'in_progress' ? held.lockedUntil : Number.NaN;
    const second = claimOf(await waitUntil('the lease ran out and the key was taken over', async () => {
      const result = await s.service.begin({ ...req, leaseMs: 30_000 });
      return result.kind === 'acquired' ? result : undefined;
    }));
    expect(Date.now()).toBeGreaterThanOrEqual(lockedUntil);
    expect(second.token).not.toBe(first.token);
    expect(second.id).toBe(first.id);
    expect(await s.store.extendLease(first)).toBe(false);
    expect(await s.store.extendLease(second)).toBe(true);
  });

  it('a dead holder\'s key is reported to another request (mismatch) until its TTL, and taken over by its own', async () => {
    const req = fresh({ leaseMs: SHORT_MS });
    claimOf(await s.service.begin(req));
    await waitUntil('the lease ran out', async () => (await s.store.find(req.scope, req.key)) === null);
    expect(await s.store.claim({ ...req, fingerprint: 'fp-b' })).toMatchObject({ kind: 'in_progress', fingerprint: 'fp-a' });
    expect((await s.store.claim(req)).kind).toBe('acquired');
  });

  it('CAS: completion and release by a holder whose claim was taken over write nothing', async () => {
    const req = fresh({ leaseMs: SHORT_MS });
    const first = claimOf(await s.service.begin(req));
    const second = claimOf(await waitUntil('the key was taken over', async () => {
      const result = await s.service.begin({ ...req, leaseMs: 30_000 });
      return result.kind === 'acquired' ? result : undefined;
    }));
    await expect(s.store.complete(first, 'stale')).resolves.toBeNull();
    await s.store.release(first, { ok: false, error: { name: 'Error', message: 'late' } });
    expect(await s.store.find(req.scope, req.key)).toMatchObject({ kind: 'in_progress', fingerprint: 'fp-a' });
    await expect(s.service.complete(second, 'fresh')).resolves.toBe(true);
    await expect(s.service.complete(second, 'twice')).resolves.toBe(false);
    expect(await s.service.begin(req)).toMatchObject({ kind: 'replay', record: { result: 'fresh' } });
  });

  it('release then reclaim: a released key is claimed again as a new record; its failure stays readable', async () => {
    const req = fresh();
    const first = claimOf(await s.service.begin(req));
    const failure = { ok: false, error: { name: 'TypeError', message: 'boom' } };
    await s.service.release(first, failure);
    expect(await s.store.find(req.scope, req.key)).toBeNull();
    expect(await s.store.recentFailure(req.scope, req.key, 60_000)).toEqual(failure);
    const second = claimOf(await s.service.begin({ ...req, fingerprint: 'fp-b' }));
    expect(second.id).not.toBe(first.id);
    await s.service.complete(second, 'after failure');
    expect(await s.service.begin({ ...req, fingerprint: 'fp-b' })).toMatchObject({ kind: 'replay', record: { result: 'after failure' } });
    await expect(s.store.recentFailure(req.scope, 'never-claimed', 60_000)).resolves.toBeUndefined();
  });

  it('complete: returns the outcome with its expiry, one TTL after the completion, in epoch milliseconds', async () => {
    const req = fresh({ ttlMs: 3_600_000 });
    const claim = claimOf(await s.service.begin(req));
    const before = Date.now();
    const record = await s.store.complete(claim, 'done');
    const after = Date.now();
    expect(record).toMatchObject({ fingerprint: 'fp-a', result: 'done' });
    // The same machine's clock on both sides; a second of slack for rounding.
    expect(record?.expiresAt).toBeGreaterThanOrEqual(before + 3_600_000 - 1_000);
    expect(record?.expiresAt).toBeLessThanOrEqual(after + 3_600_000 + 1_000);
  });

  it('TTL: a completed key is new again once its TTL has passed, never before', async () => {
    const req = fresh({ ttlMs: SHORT_MS });
    const claim = claimOf(await s.service.begin(req));
    const record = await s.store.complete(claim, 'short-lived');
    expect(record).toMatchObject({ fingerprint: 'fp-a', result: 'short-lived' });
    const again = await waitUntil('the record expired', async () => {
      const result = await s.service.begin({ ...req, fingerprint: 'fp-b' });
      return result.kind === 'acquired' ? result : undefined;
    });
    expect(Date.now()).toBeGreaterThanOrEqual(record?.expiresAt ?? Number.NaN);
    expect(again.claim.fingerprint).toBe('fp-b');
  });

  it('takenOver: set only when the claim replaced a record that was never released', async () => {
    const req = fresh({ leaseMs: SHORT_MS });
    expect(await s.store.claim(req)).toMatchObject({ kind: 'acquired', takenOver: false });
    const again = await waitUntil('the lease ran out and the key was taken over', async () => {
      const result = await s.store.claim({ ...req, leaseMs: 30_000 });
      return result.kind === 'acquired' ? result : undefined;
    });
    expect(again.takenOver).toBe(true);
    await s.store.release(again.claim, { ok: false, error: { name: 'Error', message: 'boom' } });
    expect(await s.store.claim(req)).toMatchObject({ kind: 'acquired', takenOver: false });
  });

  it('TTL counts from completion: a holder slower than its TTL still leaves an outcome to replay', async () => {
    // Long enough that the reads after the completion land within it on a loaded machine; the holder outlives it.
    const ttlMs = 5_000;
    const req = fresh({ ttlMs });
    const claim = claimOf(await s.service.begin(req));
    const claimedAt = Date.now();
    await waitUntil('the claim is older than its TTL', () => Promise.resolve(Date.now() - claimedAt > ttlMs + 100 ? true : undefined), { intervalMs: 100 });
    await expect(s.service.complete(claim, 'slow')).resolves.toBe(true);
    const stored = await s.store.find(req.scope, req.key);
    expect(stored?.kind === 'completed' && stored.record.expiresAt).toBeGreaterThan(Date.now());
    expect(await s.service.begin(req)).toMatchObject({ kind: 'replay', record: { result: 'slow' } });
  });
});
