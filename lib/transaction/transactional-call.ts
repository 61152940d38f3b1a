import type { Claim, CompletedRecord } from '../core/idempotency-record';
import type { IdempotencyService } from '../core/idempotency.service';
import { failureOutcome, RunOutcome, successOutcome } from '../core/run-outcome';
import { LeaseLostError } from '../errors/lease-lost.error';
import { StoreUnavailableError } from '../errors/store-unavailable.error';
import { TransactionAbortedError } from '../errors/transaction-aborted.error';
import { setLongInterval } from '../utils/long-timer';
import { withTransaction } from './current-transaction';
import type { OpenTransaction } from './idempotency-transactions';
import { inFailedTransaction } from './sql-state';
import { isConflict, markAbortedForConflict } from './transaction-conflicts';
import { probeTransaction } from './transaction-probe';

/**
 * One claimed call in the transactional mode. The claim is the first statement of the work's transaction, so the
 * claim, the work's writes and the stored outcome become visible in ONE commit, or not at all: until then a
 * duplicate waits for the claim at the unique index (see `IdempotencyService.beginInTransaction`), and a holder
 * that dies leaves nothing behind, not even the claim. The open transaction is the lease: nobody can take the key
 * over while it is open, and the server ends it when the holder stops answering for one lease (see {@link ping}).
 * An outcome that is not a success rolls the work's writes back to the savepoint taken after the claim and is
 * then stored or released in the same transaction, so duplicates waiting for it see it at once.
 */
export class TransactionalCall {
  private readonly stopPing: () => void;
  private done = false;

  constructor(
    private readonly engine: IdempotencyService,
    private readonly tx: OpenTransaction,
    readonly claim: Claim,
    /** Where the call was made, for errors: `IdempotencyService.run()`, `@Idempotent() / http.transaction`. */
    private readonly where: string,
  ) {
    this.stopPing = keepTransactionAlive(tx, claim.leaseMs);
  }

  /** `IdempotencyService.run()` with `transaction: true`: `fn` runs inside, and its result commits with its writes. */
  async run<T>(fn: () => T | Promise<T>, onFailure: 'unlock' | 'lock'): Promise<Awaited<T>> {
    let value: Awaited<T>;
    try {
      value = await this.inside(fn);
    } catch (err) {
      // A conflict, not `fn`'s failure: nothing is stored or passed to waiters, and IdempotencyService.run() runs the call again.
      if (await this.abandonIfAbortedForConflict(err)) throw err;
      await this.engine.settle(this.claim, () => (onFailure === 'lock' ? this.storeFailure(failureOutcome(err)) : this.releaseWith(failureOutcome(err))));
      throw err;
    }
    const outcome: RunOutcome = successOutcome(value);
    await this.commitWith(outcome);
    return value;
  }

  /** Whether the transaction is over (committed, rolled back, or being ended). */
  get finished(): boolean {
    return this.done;
  }

  /**
   * When `err`, thrown by the work, is Postgres aborting this transaction for a conflict (a serialization failure or
   * a deadlock under one of its statements, let through), rolls everything back, the claim included (the key is as
   * before), and resolves true. A conflict from elsewhere (another connection) or one the work rolled back to a
   * savepoint of its own left this transaction usable: false, and `err` is the work's failure as any other.
   */
  async abandonIfAbortedForConflict(err: unknown): Promise<boolean> {
    const aborted = !this.done && isConflict(err) && (await this.aborted());
    markAbortedForConflict(err, aborted);
    if (aborted) await this.abandon();
    return aborted;
  }

  /** Runs `work` with the transaction as `currentTransaction()`. */
  inside<T>(work: () => T | Promise<T>): Promise<Awaited<T>> {
    return withTransaction(this.tx.manager, async (): Promise<Awaited<T>> => await work());
  }

  /**
   * Stores `result` inside the transaction and commits, in one round trip: the claim, the writes and the outcome
   * become visible together. Throws {@link StoreUnavailableError} when Postgres failed (nothing of the transaction
   * survives then, not even the claim: the key is free), {@link TransactionAbortedError} when a statement of the work
   * had failed and aborted it (the key is free as well), {@link LeaseLostError} should the claim be gone.
   */
  commitWith(result: unknown): Promise<CompletedRecord> {
    return this.completeAndCommit(result, false);
  }

  /**
   * A final outcome that is not a success (a stored failure, a final 4xx): the work's writes are rolled back,
   * then `result` is stored and committed with the claim (one round trip). Throws like {@link commitWith}.
   */
  storeFailure(result: unknown): Promise<CompletedRecord> {
    return this.completeAndCommit(result, true);
  }

  /**
   * Releases the key after a failure: the work's writes are rolled back, the claim is marked failed (with
   * `error`) and committed (one round trip), so a waiting duplicate sees the failure. Never throws: should
   * Postgres fail, the whole transaction rolls back, which frees the key as well; then it resolves to false (the
   * failure may be Postgres's own, e.g. the work's query on a connection that was cut).
   */
  async releaseWith(error?: unknown): Promise<boolean> {
    if (this.done) return true;
    this.finishing();
    try {
      await this.tx.releaseAndCommit(this.claim, error, true);
      return true;
    } catch (err) {
      // the transaction rolled back whole, claim included: the key is free all the same
      this.engine.logFailedSettle(this.claim, err);
      return false;
    }
  }

  /** Rolls everything back, the claim included (the key is as it was before). Never throws; a no-op once finished. */
  async abandon(): Promise<void> {
    if (this.done) return;
    this.finishing();
    await this.tx.rollback();
  }

  /** The failure stored for the key within the last `withinMs` (by the holder this call waited for), if any. */
  failureWithin(withinMs: number): Promise<unknown> {
    return this.tx.recentFailure(this.claim.scope, this.claim.key, withinMs);
  }

  private async completeAndCommit(result: unknown, undoWork: boolean): Promise<CompletedRecord> {
    this.finishing();
    let record: CompletedRecord | null;
    try {
      record = await this.tx.completeAndCommit(this.claim, result, undoWork);
    } catch (err) {
      // The completion was refused because a statement of the work had failed and the work went on: its failure, not an outage.
      if (inFailedTransaction(err)) throw new TransactionAbortedError(`the work of idempotency key "${this.claim.key}" (${this.where})`, this.tx.abortedBy);
      throw new StoreUnavailableError(err);
    }
    if (!record) throw new LeaseLostError(this.claim.key);
    // Not written to the cache: most keys are never retried, and a Redis write per first-time key cost about as much
    // CPU as the claim's own round trip. The first duplicate reads the outcome from Postgres and caches it (see
    // IdempotencyService.decidedByStore), so later ones replay from Redis.
    return record;
  }

  /** Whether Postgres refuses the transaction's statements until it ends (SQLSTATE 25P02, "in failed transaction"). */
  private async aborted(): Promise<boolean> {
    return inFailedTransaction(await probeTransaction(this.tx));
  }

  /** Marks the call finished (its transaction is being ended) and stops pinging it. */
  private finishing(): void {
    if (this.done) throw new Error(`TransactionalCall: the transaction of key "${this.claim.key}" is already finished`);
    this.done = true;
    this.stopPing();
  }
}

/** Pings the transaction every third of the lease while the call runs; failures are left to the call's own statements. */
function keepTransactionAlive(tx: OpenTransaction, leaseMs: number): () => void {
  const timer = setLongInterval(() => void tx.ping().catch(() => undefined), Math.max(Math.floor(leaseMs / 3), 10), { unref: true });
  return () => timer.clear();
}
