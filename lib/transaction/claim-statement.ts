import type { ClaimOutcome } from '../core/idempotency-record';

/** What a claim made inside a transaction found: a claim outcome, or why it must be asked again / given up. */
export type ClaimAttempt =
  | ClaimOutcome
  /** A claim committed after the statement's snapshot decided the key (or a serialization failure): ask again in a new transaction. */
  | 'raced'
  /** Another transaction's uncommitted claim of the key held it longer than the allowed wait. */
  | 'lock timeout'
  /** Another transaction's uncommitted claim of the key holds it (the claim was made without a wait). */
  | 'held';
