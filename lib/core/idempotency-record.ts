/** Lifecycle of a key. Only `failed`, `cancelled` and `timed_out` let the key be claimed again before it expires. */
export type RecordStatus = 'in_progress' | 'completed' | 'failed' | 'cancelled' | 'timed_out';

/** Statuses that release a key: the partial unique index ignores rows in these. */
export const RELEASED_STATUSES: readonly RecordStatus[] = ['failed', 'cancelled', 'timed_out'];

/** What a claim asks the store for. */
export interface ClaimRequest {
  scope: string;
  key: string;
  fingerprint: string;
  leaseMs: number;
  ttlMs: number;
}

/** Proof of holding a key: completion and lease renewal are compare-and-set on `token`. */
export interface Claim {
  id: string;
  scope: string;
  key: string;
  fingerprint: string;
  token: string;
  leaseMs: number;
}

/** A finished record: the stored outcome a duplicate receives. */
export interface CompletedRecord {
  fingerprint: string;
  /** The stored outcome (JSON). */
  result: unknown;
  /** Epoch milliseconds after which the key is new again. */
  expiresAt: number;
}

/** What the store answers to a claim. */
export type ClaimOutcome =
  /**
   * `takenOver`: the claim replaced a record that was never released — a holder whose lease lapsed (presumed
   * dead) or an expired outcome — rather than a free key or one released after a failure. Stores that cannot
   * tell leave it undefined.
   */
  | { kind: 'acquired'; claim: Claim; takenOver?: boolean }
  | { kind: 'completed'; record: CompletedRecord }
  | { kind: 'in_progress'; fingerprint: string; lockedUntil: number };
