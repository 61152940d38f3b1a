import { Claim, ClaimOutcome, ClaimRequest, CompletedRecord } from '../core/idempotency-record';

/**
 * The source of truth for keys. Implementations must make `claim` atomic across processes
 * and make `complete`, `release` and `extendLease` compare-and-set on the claim's token.
 */
export abstract class IdempotencyStore {
  /** Claims the key, or reports the record that holds it (a live in-progress claim or a completed outcome). */
  abstract claim(request: ClaimRequest): Promise<ClaimOutcome>;
  /**
   * Stores the final outcome, which then lives for the claim's ttl counted from now (not from the claim); null when
   * the claim was lost (lease taken over), in which case nothing is written.
   */
  abstract complete(claim: Claim, result: unknown): Promise<CompletedRecord | null>;
  /** Marks the claim failed so that the key can be claimed again. */
  abstract release(claim: Claim, error?: unknown): Promise<void>;
  /** Pushes the lease forward; false when the claim was lost. */
  abstract extendLease(claim: Claim): Promise<boolean>;
  /** The stored error of the newest claim on the key released within the last `withinMs`, if any. */
  abstract recentFailure(scope: string, key: string, withinMs: number): Promise<unknown>;
  /** Reads the live record for a key, if any (expired and released records count as absent). */
  abstract find(scope: string, key: string): Promise<ClaimOutcome | null>;
}
