import type { TransactionIsolation } from '../transaction/transaction-options';
import type { Duration } from '../utils/duration';

/** What a duplicate call gets: the stored result, a DuplicateExecutionError, or the first call's outcome after waiting. */
export type OnDuplicate = 'return' | 'raise' | 'wait';

/** What a failure does to the key: release it so a retry runs (`unlock`), or store it as the final outcome (`lock`). */
export type OnFailure = 'unlock' | 'lock';

/** Options of `IdempotencyService.run()` and `@IdempotentMethod()`. */
export interface RunOptions {
  /** Keys in different scopes never meet. Default `"default"`. */
  scope?: string;
  /** How long the outcome is remembered. Default `"24h"`. */
  ttl?: Duration;
  /** The lease: a holder silent for this long is presumed dead and the next caller takes over. Default `"30s"`. */
  lockTimeout?: Duration;
  /** Default `"return"`. */
  onDuplicate?: OnDuplicate;
  /** Default `"unlock"`. */
  onFailure?: OnFailure;
  /** With `onDuplicate: "wait"`, the longest a duplicate waits for the first call. Default `"30s"`. */
  waitTimeout?: Duration;
  /**
   * What the key stands for (e.g. a hash of the arguments). A later call with the same key and another
   * fingerprint is refused with IdempotencyKeyReusedError. Default: not checked.
   */
  fingerprint?: string;
  /**
   * Run `fn` in a Postgres transaction of the library (`currentTransaction()` inside it) that also stores the
   * outcome: its writes commit if and only if the outcome is stored, so they happen exactly once, across crashes
   * too. Needs the module's Postgres connection to reach the handler's tables. Default false.
   */
  transaction?: boolean;
  /** Isolation level of that transaction. Default `"read committed"`. */
  isolation?: TransactionIsolation;
}
