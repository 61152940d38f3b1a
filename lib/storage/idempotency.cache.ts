import { CompletedRecord } from '../core/idempotency-record';

/** What the cache knows of a key. `miss` never means the key is new: the store decides that. */
export type CacheLookup =
  | { kind: 'hit'; record: CompletedRecord }
  | { kind: 'busy'; fingerprint: string }
  | { kind: 'miss' };

/**
 * A fast layer in front of the store: caches completed records and marks keys in flight so that
 * storms of duplicates are answered without reaching Postgres. Every method must tolerate an outage
 * by answering `miss` / doing nothing; it is never the authority.
 */
export abstract class IdempotencyCache {
  /**
   * False when the cache keeps no records (Redis disabled): the engine then reads the store before it claims,
   * so that a replay costs one indexed read and no write.
   */
  readonly holdsRecords: boolean = true;

  /** Returns a cached completed record, or the in-flight marker's fingerprint, or marks the key in flight and misses. */
  abstract lookup(scope: string, key: string, fingerprint: string, leaseMs: number): Promise<CacheLookup>;
  /**
   * The cached completed record of the key, if any; unlike {@link lookup} it marks nothing (the transactional mode's
   * claim waits at the unique index instead). A cache without it answers undefined: the store decides.
   */
  peek(_scope: string, _key: string): Promise<CompletedRecord | undefined> {
    return Promise.resolve(undefined);
  }
  /** Caches a completed record until it expires and clears the in-flight marker. */
  abstract remember(scope: string, key: string, record: CompletedRecord): Promise<void>;
  /** Clears the in-flight marker (the claim was released or never taken). */
  abstract forget(scope: string, key: string): Promise<void>;
  /** Extends the in-flight marker while the holder is alive. */
  abstract touch(scope: string, key: string, leaseMs: number): Promise<void>;
}

/** One settled answer for every lookup of {@link NoCache}: a Postgres-only request allocates none. */
const MISS: Promise<CacheLookup> = Promise.resolve({ kind: 'miss' });

/** The cache used when Redis is disabled: always a miss, so every decision is the store's. */
export class NoCache extends IdempotencyCache {
  override readonly holdsRecords = false;

  lookup(): Promise<CacheLookup> {
    return MISS;
  }
  remember(): Promise<void> {
    return Promise.resolve();
  }
  forget(): Promise<void> {
    return Promise.resolve();
  }
  touch(): Promise<void> {
    return Promise.resolve();
  }
}
