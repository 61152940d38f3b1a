import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { LibraryLogger } from '../observability/library-logger';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { DuplicateExecutionError } from '../errors/duplicate-execution.error';
import { IdempotencyConfigError } from '../errors/idempotency-config.error';
import { IdempotencyKeyReusedError } from '../errors/idempotency-key-reused.error';
import { ResultNotStoredError } from '../errors/result-not-stored.error';
import { StoreRejectedError } from '../errors/store-rejected.error';
import { StoreUnavailableError } from '../errors/store-unavailable.error';
import { StoredFailureError } from '../errors/stored-failure.error';
import type { RunOptions } from '../interfaces/run-options.interface';
import { canonicalJson } from '../utils/canonical-json';
import { parseDuration } from '../utils/duration';
import { IdempotencyCache } from '../storage/idempotency.cache';
import { IdempotencyStore } from '../storage/idempotency.store';
import { assertClaimLimits } from './claim-limits';
import { Claim, ClaimRequest, CompletedRecord } from './idempotency-record';
import { isStoreOutage } from './store-failure';
import { failureOutcome, RunOutcome, successOutcome } from './run-outcome';
import { setLongInterval } from '../utils/long-timer';
import { activeTransaction } from '../transaction/current-transaction';
import type { ClaimAttempt } from '../transaction/claim-statement';
import { IdempotencyTransactions, OpenTransaction } from '../transaction/idempotency-transactions';
import { TransactionalCall } from '../transaction/transactional-call';
import { abortedForConflict, runAgainOnConflict } from '../transaction/transaction-conflicts';
import { TransactionIsolation, transactionOptionProblems } from '../transaction/transaction-options';
import { IdempotencyObserver, NoopObserver } from '../observability/idempotency-observer';

/** What `begin` decided for a request. */
export type BeginResult =
  /**
   * `waited`: set by beginOrWait when the key was held by another caller first. `takenOver`: this claim
   * replaced a holder whose lease lapsed (see ClaimOutcome) rather than one that released the key. `call`: set by
   * beginInTransaction, the open transaction the claim is in (the work must run inside it).
   */
  | { kind: 'acquired'; claim: Claim; waited?: boolean; takenOver?: boolean; call?: TransactionalCall }
  | { kind: 'replay'; record: CompletedRecord }
  | { kind: 'mismatch' }
  | { kind: 'in_progress'; retryAfterMs: number };

const RUN_DEFAULTS = { ttlMs: 86_400_000, leaseMs: 30_000, waitMs: 30_000 };

const WAIT_POLL_MIN_MS = 20;
const COMPLETE_RETRY_MIN_MS = 50;
const COMPLETE_RETRY_MAX_MS = 1_000;
const WAIT_POLL_MAX_MS = 250;
/** How many transactions a transactional claim opens when claims committed after its snapshot keep deciding the key. */
const TRANSACTIONAL_CLAIM_ATTEMPTS = 10;

/**
 * The key lifecycle engine every face uses (HTTP interceptor, method guard, workflows, inbox):
 * claim with a lease and a token, complete by compare-and-set, release on failure, replay, expiry.
 * Postgres (the store) decides; Redis (the cache) only answers what Postgres already decided.
 */
@Injectable()
export class IdempotencyService {
  private readonly logger: Logger = new LibraryLogger('Idempotency');
  @Optional() @Inject(IdempotencyObserver) private readonly observer: IdempotencyObserver = new NoopObserver();

  constructor(
    private readonly store: IdempotencyStore,
    private readonly cache: IdempotencyCache,
    @Optional() private readonly transactions?: IdempotencyTransactions,
  ) {}

  /**
   * The transactional mode's transactions; throws {@link IdempotencyConfigError} where the mode cannot work
   * (no Postgres store, e.g. IdempotencyTestingModule). `where` names the option that asked for it.
   */
  transactionsFor(where: string): IdempotencyTransactions {
    if (!this.transactions) {
      throw new IdempotencyConfigError([
        `${where}: transaction: true needs the Postgres store of IdempotencyModule.forRoot() (the handler's writes commit in its database); ` +
          'this module has none (IdempotencyTestingModule?). Remove transaction: true here, or test it against Postgres',
      ], 'transaction: true cannot work without Postgres');
    }
    return this.transactions;
  }

  /**
   * Claims `request.key` in `request.scope` or says why not: a stored outcome to replay, a live holder,
   * or a fingerprint mismatch. Throws {@link IdempotencyInputTooLongError} for a key or scope the store
   * cannot index (before asking it), {@link StoreUnavailableError} when the store cannot be reached, and
   * {@link StoreRejectedError} when it refuses the claim for another reason (not an outage).
   */
  begin(request: ClaimRequest): Promise<BeginResult> {
    return this.observer.decide(request.scope, request.key, () => this.decide(request));
  }

  private async decide(request: ClaimRequest): Promise<BeginResult> {
    assertClaimLimits(request);
    if (!this.cache.holdsRecords) {
      // No cache to ask (redis: false): one indexed read, then the claim.
      return (await this.readBeforeClaim(request)) ?? this.claimInStore(request, false);
    }
    const cached = await this.cache.lookup(request.scope, request.key, request.fingerprint, request.leaseMs);
    if (cached.kind === 'hit') return answerFor(request, cached.record);
    if (cached.kind === 'busy' && cached.fingerprint === request.fingerprint) {
      return { kind: 'in_progress', retryAfterMs: request.leaseMs };
    }
    // A miss (the cache marked the key in flight for us) or a marker with another fingerprint: Postgres decides.
    return this.claimInStore(request, cached.kind === 'miss');
  }

  /** The claim in Postgres, which decides; `marked`: this request set the cache's in-flight marker (cleared unless it acquired). */
  private async claimInStore(request: ClaimRequest, marked: boolean): Promise<BeginResult> {
    let outcome;
    try {
      outcome = await this.store.claim(request);
    } catch (err) {
      if (marked) await this.cache.forget(request.scope, request.key);
      throw isStoreOutage(err) ? new StoreUnavailableError(err) : new StoreRejectedError(err);
    }
    switch (outcome.kind) {
      case 'acquired':
        return outcome;
      case 'completed':
        return this.decidedByStore(request, outcome.record, marked);
      case 'in_progress':
        if (outcome.fingerprint !== request.fingerprint) {
          if (marked) await this.cache.forget(request.scope, request.key);
          return { kind: 'mismatch' };
        }
        // A marker this request set must not outlive the holder's lease, or a dead holder's key stays blocked.
        if (marked) await this.cache.touch(request.scope, request.key, Math.max(outcome.lockedUntil - Date.now(), 1));
        return { kind: 'in_progress', retryAfterMs: Math.max(outcome.lockedUntil - Date.now(), 0) };
    }
  }

  /** A completed record the store found: replayed (and cached) or a mismatch (the marker this request set is cleared). */
  private async decidedByStore(request: ClaimRequest, record: CompletedRecord, marked: boolean): Promise<BeginResult> {
    if (record.fingerprint !== request.fingerprint) {
      if (marked) await this.cache.forget(request.scope, request.key);
      return { kind: 'mismatch' };
    }
    await this.cache.remember(request.scope, request.key, record);
    return { kind: 'replay', record };
  }

  /**
   * {@link begin} for the transactional mode: the claim is the first statement of a transaction that the work then
   * runs in (the acquired result carries it as `call`), so that claim, writes and outcome commit once. Only a cached
   * outcome is answered before Postgres (read, nothing marked): an in-flight marker would not be trusted, because the claim it stands for may
   * be uncommitted (a duplicate then waits for it at the unique index, at most `waitMs`, and replays its outcome,
   * or claims the key after a rollback) or gone with a holder that died (then the key is free at once). After
   * the wait the answer is in progress, as after any other. Every wait for a pooled connection is bounded by one
   * lease ({@link StoreUnavailableError}); there is no other pool use on this path.
   */
  beginInTransaction(request: ClaimRequest, options: { isolation: TransactionIsolation; waitMs: number }, where: string): Promise<BeginResult> {
    return this.observer.decide(request.scope, request.key, () => this.decideInTransaction(request, options, where));
  }

  private async decideInTransaction(request: ClaimRequest, options: { isolation: TransactionIsolation; waitMs: number }, where: string): Promise<BeginResult> {
    assertClaimLimits(request);
    const transactions = this.transactionsFor(where);
    // Only a finished outcome is read from the cache, and nothing is marked there: duplicates meet at the unique index.
    const cached = await this.cache.peek(request.scope, request.key);
    if (cached) return answerFor(request, cached);
    const deadline = Date.now() + options.waitMs;
    let waited = false;
    let pause = WAIT_POLL_MIN_MS;
    for (let attempt = 1; ; attempt++) {
      // The first attempt does not wait for another claimer: a holder it meets makes this call one that waited (see run()).
      const claim = { request, token: randomUUID(), waitMs: waited ? Math.max(deadline - Date.now(), 1) : 0 };
      let tx: OpenTransaction;
      let outcome: ClaimAttempt;
      try {
        ({ tx, outcome } = await transactions.beginWithClaim(options.isolation, request.leaseMs, activeTransaction(), claim));
      } catch (err) {
        if (err instanceof StoreUnavailableError) throw err;
        throw isStoreOutage(err) ? new StoreUnavailableError(err) : new StoreRejectedError(err);
      }
      if (typeof outcome === 'object' && outcome.kind === 'acquired') {
        return { ...outcome, waited, call: new TransactionalCall(this, tx, outcome.claim, where) };
      }
      await tx.rollback();
      if (outcome === 'raced' && attempt < TRANSACTIONAL_CLAIM_ATTEMPTS) continue;
      if (typeof outcome === 'object' && outcome.kind === 'completed') return this.decidedByStore(request, outcome.record, false);
      if (typeof outcome === 'object' && outcome.fingerprint !== request.fingerprint) return { kind: 'mismatch' };
      // An uncommitted claim (held, lock timeout), or a committed one of a holder outside this mode: wait while allowed.
      const heldByTransaction = outcome === 'lock timeout' || outcome === 'held';
      if (Date.now() + (heldByTransaction ? 1 : pause) > deadline) {
        return { kind: 'in_progress', retryAfterMs: typeof outcome === 'object' ? Math.max(outcome.lockedUntil - Date.now(), 0) : request.leaseMs };
      }
      waited = true;
      if (!heldByTransaction) {
        await sleep(pause);
        pause = Math.min(pause * 2, WAIT_POLL_MAX_MS);
      }
    }
  }

  /**
   * Without a cache, a replay or a live holder is found by one indexed read (no write, no row lock); only a key
   * that read finds free goes on to the claim, which decides as before (a row committed in between included).
   */
  private async readBeforeClaim(request: ClaimRequest): Promise<BeginResult | undefined> {
    let found;
    try {
      found = await this.store.find(request.scope, request.key);
    } catch (err) {
      throw isStoreOutage(err) ? new StoreUnavailableError(err) : new StoreRejectedError(err);
    }
    if (!found) return undefined;
    if (found.kind === 'completed') {
      return found.record.fingerprint === request.fingerprint ? { kind: 'replay', record: found.record } : { kind: 'mismatch' };
    }
    if (found.kind !== 'in_progress') return undefined;
    if (found.fingerprint !== request.fingerprint) return { kind: 'mismatch' };
    return { kind: 'in_progress', retryAfterMs: Math.max(found.lockedUntil - Date.now(), 0) };
  }

  /**
   * Runs `fn` at most once per `key` (at least once across crashes: a dead holder's lease expires and
   * the next caller takes over). Duplicates get the stored result, a DuplicateExecutionError, or wait,
   * as `onDuplicate` says; a failure releases the key unless `onFailure` is `"lock"`. With `transaction: true`, a
   * transaction Postgres aborts for a conflict at the completion or COMMIT runs again in place (at most 10 times).
   */
  async run<T>(key: string, fn: () => T | Promise<T>, options: RunOptions = {}): Promise<Awaited<T>> {
    const settings = resolveRunOptions(options);
    if (settings.transaction) this.transactionsFor('IdempotencyService.run()'); // refused before anything is claimed
    const request: ClaimRequest = {
      scope: `method:${options.scope ?? 'default'}`,
      key,
      fingerprint: options.fingerprint ?? '',
      leaseMs: settings.leaseMs,
      ttlMs: settings.ttlMs,
    };
    // Inside an outer transaction a conflict aborts that one: it is the outer work's to run again, not this call's.
    if (!settings.transaction || activeTransaction()) return this.runOnce(request, fn, options, settings);
    // Postgres aborted the call's transaction for a conflict with a concurrent one ('repeatable read' and
    // 'serializable' do; a deadlock too), under one of `fn`'s statements or at the completion or the COMMIT: nothing
    // of it committed, not even the claim, and Postgres's advice is to run it again — `fn` included, as after a crash.
    return runAgainOnConflict(() => this.runOnce(request, fn, options, settings), abortedForConflict);
  }

  private async runOnce<T>(request: ClaimRequest, fn: () => T | Promise<T>, options: RunOptions, settings: RunSettings): Promise<Awaited<T>> {
    const key = request.key;
    const waitStarted = Date.now();
    const waitMs = options.onDuplicate === 'wait' ? settings.waitMs : 0;
    const begun = settings.transaction
      ? await this.beginInTransaction(request, { isolation: settings.transaction.isolation, waitMs }, 'IdempotencyService.run()')
      : waitMs > 0 ? await this.beginOrWait(request, waitMs) : await this.begin(request);
    switch (begun.kind) {
      case 'mismatch':
        throw new IdempotencyKeyReusedError(key);
      case 'in_progress':
        throw new DuplicateExecutionError(key, 'in_progress');
      case 'replay':
        if (options.onDuplicate === 'raise') throw new DuplicateExecutionError(key, 'completed');
        return replayOutcome(key, begun.record.result as RunOutcome) as Awaited<T>;
      case 'acquired':
        // The run this call waited for released the key after a failure: report it. A holder that died (its
        // lapsed lease was taken over) reported nothing, so this call runs; so does the first caller.
        if (begun.waited && !begun.takenOver) await this.rethrowFailureWaitedFor(begun, Date.now() - waitStarted);
        if (begun.call) return begun.call.run(fn, options.onFailure ?? 'unlock');
        return this.runClaimed(begun.claim, fn, options.onFailure ?? 'unlock');
    }
  }

  /**
   * A duplicate that waited for a holder, which then released the key: if that holder failed, the duplicate
   * gets its error instead of running again. Only failures released while this call waited count, never an
   * older one (a holder that crashed releases nothing: its claim is taken over, see run()).
   */
  private async rethrowFailureWaitedFor(begun: { claim: Claim; call?: TransactionalCall }, waitedMs: number): Promise<void> {
    const { claim, call } = begun;
    const withinMs = waitedMs + WAIT_POLL_MAX_MS;
    let failure: RunOutcome | undefined;
    try {
      failure = (await (call ? call.failureWithin(withinMs) : this.store.recentFailure(claim.scope, claim.key, withinMs))) as RunOutcome | undefined;
    } catch (err) {
      await call?.abandon();
      throw err;
    }
    if (failure && !failure.ok) {
      // passes the same failure on to the waiters behind this one
      await (call ? call.releaseWith(failure) : this.release(claim, failure));
      throw new StoredFailureError(claim.key, failure.error.name, failure.error.message);
    }
  }

  private async runClaimed<T>(claim: Claim, fn: () => T | Promise<T>, onFailure: 'unlock' | 'lock'): Promise<Awaited<T>> {
    const stopLease = this.keepAlive(claim);
    let value: Awaited<T>;
    try {
      value = await fn();
    } catch (err) {
      stopLease();
      await this.settle(claim, () => (onFailure === 'lock' ? this.complete(claim, failureOutcome(err)) : this.release(claim, failureOutcome(err))));
      throw err;
    }
    stopLease();
    const outcome = successOutcome(value);
    if ('notStored' in outcome) {
      this.logger.warn(`result of the call with key "${claim.key}" is not JSON-serializable: duplicates get ResultNotStoredError instead of it`);
    }
    await this.settle(claim, () => this.complete(claim, outcome));
    return value;
  }

  /** Settling after the work ran must not turn its success into a failure: a store error is logged, the lease then expires. */
  async settle(claim: Claim, action: () => Promise<unknown>): Promise<void> {
    try {
      await action();
    } catch (err) {
      this.logFailedSettle(claim, err);
    }
  }

  /** Logs that the outcome of `claim` could not be recorded. */
  logFailedSettle(claim: Claim, err: unknown): void {
    this.logger.error(`could not record the outcome for key "${claim.key}" (its lease will expire): ${err instanceof Error ? err.message : String(err)}`);
  }

  /**
   * Like {@link begin}, but holds a request that finds the key in progress until the holder finishes
   * (replay), releases it (this request takes it), or `waitMs` passes (in progress).
   */
  async beginOrWait(request: ClaimRequest, waitMs: number): Promise<BeginResult> {
    const deadline = Date.now() + waitMs;
    let pause = WAIT_POLL_MIN_MS;
    let waited = false;
    for (;;) {
      const result = await this.begin(request);
      if (result.kind === 'acquired' && waited) return { ...result, waited };
      if (result.kind !== 'in_progress' || Date.now() + pause > deadline) return result;
      waited = true;
      await new Promise((resolve) => setTimeout(resolve, pause));
      pause = Math.min(pause * 2, WAIT_POLL_MAX_MS);
    }
  }

  /**
   * Stores the final outcome of a claim. Returns false when the claim had been taken over (its lease
   * expired and another caller claimed the key): nothing is written then, and the newer record stands.
   */
  async complete(claim: Claim, result: unknown): Promise<boolean> {
    return this.completed(claim, await this.store.complete(claim, result));
  }

  /**
   * Like {@link complete}, but rides out a store outage (a restart, a dropped connection): the write is retried
   * with backoff (50 ms to 1 s) for at most `withinMs`. Throws {@link StoreUnavailableError} when the outcome
   * could not be stored in that time, or at once on an error that retrying cannot mend. The caller keeps the
   * lease alive meanwhile. With `cacheInBackground`, it resolves once Postgres holds the outcome, without waiting
   * for the cache to take it (see {@link completed}).
   */
  async completeWithin(claim: Claim, result: unknown, withinMs: number, cacheInBackground = false): Promise<boolean> {
    const deadline = Date.now() + withinMs;
    let retried = false;
    for (let delay = COMPLETE_RETRY_MIN_MS; ; delay = Math.min(delay * 2, COMPLETE_RETRY_MAX_MS)) {
      try {
        let record = await this.store.complete(claim, result);
        // An attempt whose connection dropped may have committed: then the record holds this very result.
        if (!record && retried) record = await this.ownCompletion(claim, result);
        return await this.completed(claim, record, cacheInBackground);
      } catch (err) {
        if (!isStoreOutage(err) || Date.now() + delay > deadline) throw new StoreUnavailableError(err);
        if (!retried) this.logger.warn(`storing the outcome for key "${claim.key}" failed (${err instanceof Error ? err.message : String(err)}); retrying`);
        retried = true;
        await sleep(delay);
      }
    }
  }

  /** The completed record of the key when it holds exactly `result` (written by an earlier attempt of this claim). */
  private async ownCompletion(claim: Claim, result: unknown): Promise<CompletedRecord | null> {
    const found = await this.store.find(claim.scope, claim.key);
    if (found?.kind !== 'completed' || found.record.fingerprint !== claim.fingerprint) return null;
    return canonicalJson(found.record.result) === canonicalJson(result) ? found.record : null;
  }

  /**
   * Records a completion written by another path (e.g. inside the handler's transaction) in the cache; false when
   * `record` is null. `inBackground`: the cache write is sent but not waited for (it never fails: the cache answers
   * an outage with nothing).
   */
  async completed(claim: Claim, record: CompletedRecord | null, inBackground = false): Promise<boolean> {
    if (!record) {
      this.logger.warn(`lease on key "${claim.key}" was lost before completion; its result was not stored`);
      return false;
    }
    const remembered = this.cache.remember(claim.scope, claim.key, record);
    if (inBackground) void remembered.catch(() => undefined);
    else await remembered;
    return true;
  }

  /** Releases a claim after a failure: the record is marked failed and the key can be claimed again. */
  async release(claim: Claim, error?: unknown): Promise<void> {
    await this.store.release(claim, error);
    await this.cache.forget(claim.scope, claim.key);
  }

  /** Renews the claim's lease every third of its length until the returned function is called. */
  keepAlive(claim: Claim): () => void {
    const renew = async () => {
      try {
        const held = await this.store.extendLease(claim);
        if (held) await this.cache.touch(claim.scope, claim.key, claim.leaseMs);
        else this.logger.warn(`lease on key "${claim.key}" was taken over while its holder was still running`);
      } catch (err) {
        this.logger.warn(`could not renew the lease on key "${claim.key}": ${err instanceof Error ? err.message : String(err)}`);
      }
    };
    const timer = setLongInterval(() => void renew(), Math.max(Math.floor(claim.leaseMs / 3), 10), { unref: true });
    return () => timer.clear();
  }
}

interface RunSettings {
  ttlMs: number;
  leaseMs: number;
  waitMs: number;
  transaction?: { isolation: TransactionIsolation };
}

function resolveRunOptions(options: RunOptions): RunSettings {
  const read = (name: keyof RunOptions, fallback: number): number => {
    const value = options[name];
    if (value === undefined) return fallback;
    const parsed = parseDuration(value);
    if (typeof parsed !== 'number' || parsed <= 0) {
      throw new IdempotencyConfigError([`${name}: ${typeof parsed === 'number' ? 'must be greater than zero' : parsed.error}`]);
    }
    return parsed;
  };
  const problems = transactionOptionProblems(options);
  if (problems.length > 0) throw new IdempotencyConfigError(problems);
  return {
    ttlMs: read('ttl', RUN_DEFAULTS.ttlMs),
    leaseMs: read('lockTimeout', RUN_DEFAULTS.leaseMs),
    waitMs: read('waitTimeout', RUN_DEFAULTS.waitMs),
    transaction: options.transaction ? { isolation: options.isolation ?? 'read committed' } : undefined,
  };
}

/** A completed record answers a request: replayed when it is the same request, a mismatch otherwise. */
function answerFor(request: ClaimRequest, record: CompletedRecord): BeginResult {
  return record.fingerprint === request.fingerprint ? { kind: 'replay', record } : { kind: 'mismatch' };
}

function replayOutcome(key: string, outcome: RunOutcome): unknown {
  if (!outcome.ok) throw new StoredFailureError(key, outcome.error.name, outcome.error.message);
  if ('notStored' in outcome) throw new ResultNotStoredError(key);
  return outcome.value;
}
