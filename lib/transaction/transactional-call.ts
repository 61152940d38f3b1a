import type { Claim, CompletedRecord } from '../core/idempotency-record';
import type { IdempotencyService } from '../core/idempotency.service';
import { failureOutcome, RunOutcome, successOutcome } from '../core/run-outcome';
import { LeaseLostError } from '../errors/lease-lost.error';
import { StoreUnavailableError } from '../errors/store-unavailable.error';
import { activeTransaction, withTransaction } from './current-transaction';
import type { IdempotencyTransactions, OpenTransaction } from './idempotency-transactions';
import type { TransactionIsolation } from './transaction-options';

/**
 * One claimed call in the transactional mode: the work runs in a transaction of the library, and the claim's
 * completion (compare-and-set on its token) is written in that same transaction, so the work's writes and the
 * stored outcome commit together or not at all. Anything that ends without that commit rolls the writes back
 * before the key is released or a failure stored.
 */
export class TransactionalCall {
  private tx?: OpenTransaction;
  private stopLease: () => void = () => undefined;

  constructor(
    private readonly engine: IdempotencyService,
    private readonly transactions: IdempotencyTransactions,
    readonly claim: Claim,
    private readonly isolation: TransactionIsolation,
  ) {}

  /** `IdempotencyService.run()` with `transaction: true`: `fn` runs inside, and its result commits with its writes. */
  async run<T>(fn: () => T | Promise<T>, onFailure: 'unlock' | 'lock'): Promise<Awaited<T>> {
    await this.open();
    let value: Awaited<T>;
    try {
      value = await this.inside(fn);
    } catch (err) {
      await this.rollBack();
      await this.engine.settle(this.claim, () =>
        onFailure === 'lock' ? this.engine.complete(this.claim, failureOutcome(err)) : this.engine.release(this.claim, failureOutcome(err)));
      throw err;
    }
    const outcome: RunOutcome = successOutcome(value);
    await this.commitWith(outcome);
    return value;
  }

  /**
   * Opens the transaction and keeps the lease alive meanwhile. Waits at most one lease for a free connection;
   * when none comes (or Postgres is down) the key is released and {@link StoreUnavailableError} thrown.
   */
  async open(): Promise<void> {
    this.stopLease = this.engine.keepAlive(this.claim);
    try {
      this.tx = await this.transactions.begin(this.isolation, this.claim.leaseMs, activeTransaction());
    } catch (err) {
      this.stopLease();
      // Not awaited: with every pooled connection busy the release itself waits for one, and the caller must not.
      void this.engine.settle(this.claim, () => this.engine.release(this.claim, failureOutcome(err)));
      throw err instanceof StoreUnavailableError ? err : new StoreUnavailableError(err);
    }
  }

  /** Runs `work` with the transaction as `currentTransaction()`. */
  inside<T>(work: () => T | Promise<T>): Promise<Awaited<T>> {
    return withTransaction(this.opened().manager, async (): Promise<Awaited<T>> => await work());
  }

  /**
   * Stores `result` inside the transaction and commits. Throws {@link LeaseLostError} when the claim was taken
   * over, {@link StoreUnavailableError} when Postgres failed; in both cases nothing of the transaction survives
   * (a commit whose fate is unknown is resolved by the compare-and-set: either it stored the outcome with the
   * writes, or the key is released).
   */
  async commitWith(result: unknown): Promise<CompletedRecord> {
    const tx = this.opened();
    this.stopLease(); // an in-flight renewal only waits for the row lock below, it never holds one we need
    let record: CompletedRecord | null;
    try {
      record = await tx.complete(this.claim, result);
    } catch (err) {
      await tx.rollback();
      await this.engine.settle(this.claim, () => this.engine.release(this.claim, failureOutcome(err)));
      throw new StoreUnavailableError(err);
    }
    if (!record) {
      await tx.rollback();
      throw new LeaseLostError(this.claim.key);
    }
    try {
      await tx.commit();
    } catch (err) {
      await this.engine.settle(this.claim, () => this.engine.release(this.claim, failureOutcome(err)));
      throw new StoreUnavailableError(err);
    }
    // Within an outer transaction nothing is durable before it commits: the cache must not answer for it yet.
    if (!tx.nested) await this.engine.completed(this.claim, record);
    return record;
  }

  /** Rolls the transaction back (its writes are undone) and stops renewing the lease; the claim is left to the caller. */
  async rollBack(): Promise<void> {
    this.stopLease();
    await this.tx?.rollback();
  }

  private opened(): OpenTransaction {
    if (!this.tx) throw new Error('TransactionalCall: open() was not called');
    return this.tx;
  }
}
