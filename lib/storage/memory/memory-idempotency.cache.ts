import { CompletedRecord } from '../../core/idempotency-record';
import { CacheLookup, IdempotencyCache } from '../idempotency.cache';
import { jsonCopy, slot } from './memory-support';

interface Entry<T> {
  value: T;
  expiresAt: number;
}

/**
 * The in-memory cache of `IdempotencyTestingModule`, with the Redis cache's rules: completed records are kept until
 * they expire, an in-flight marker (the first caller's fingerprint) lives for one lease, and a miss marks the key in
 * flight. Like Redis it never decides that a key is new: the store does.
 */
export class MemoryIdempotencyCache extends IdempotencyCache {
  private readonly records = new Map<string, Entry<CompletedRecord>>();
  private readonly markers = new Map<string, Entry<string>>();

  lookup(scope: string, key: string, fingerprint: string, leaseMs: number): Promise<CacheLookup> {
    const id = slot(scope, key);
    const record = live(this.records, id);
    if (record) return Promise.resolve({ kind: 'hit', record: jsonCopy(record) });
    const marker = live(this.markers, id);
    if (marker !== undefined) return Promise.resolve({ kind: 'busy', fingerprint: marker });
    this.markers.set(id, { value: fingerprint, expiresAt: Date.now() + leaseMs });
    return Promise.resolve({ kind: 'miss' });
  }

  override peek(scope: string, key: string): Promise<CompletedRecord | undefined> {
    const record = live(this.records, slot(scope, key));
    return Promise.resolve(record ? jsonCopy(record) : undefined);
  }

  remember(scope: string, key: string, record: CompletedRecord): Promise<void> {
    const id = slot(scope, key);
    if (record.expiresAt > Date.now()) this.records.set(id, { value: jsonCopy(record), expiresAt: record.expiresAt });
    this.markers.delete(id);
    return Promise.resolve();
  }

  forget(scope: string, key: string): Promise<void> {
    this.markers.delete(slot(scope, key));
    return Promise.resolve();
  }

  touch(scope: string, key: string, leaseMs: number): Promise<void> {
    const marker = this.markers.get(slot(scope, key));
    if (marker && marker.expiresAt > Date.now()) marker.expiresAt = Date.now() + leaseMs;
    return Promise.resolve();
  }

  /** Forgets every entry (between tests). */
  clear(): void {
    this.records.clear();
    this.markers.clear();
  }
}

function live<T>(entries: Map<string, Entry<T>>, id: string): T | undefined {
  const entry = entries.get(id);
  if (!entry) return undefined;
  if (entry.expiresAt > Date.now()) return entry.value;
  entries.delete(id);
  return undefined;
}
