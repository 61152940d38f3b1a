import { randomUUID } from 'node:crypto';
import type { Pool, QueryResultRow } from 'pg';
import { Claim, ClaimOutcome, ClaimRequest, CompletedRecord } from '../../core/idempotency-record';
import { IdempotencyStore } from '../idempotency.store';
import { IdempotencySql, idempotencySql } from './idempotency.sql';
import { CallBatcher } from '../call-batcher';
import { isRowLevelFailure } from './row-level-failure';
import { StoreConnection, withPreparedStatements } from './statements';

/** A row of the claim statements. */
export interface ClaimRow extends QueryResultRow {
  id: string;
  outcome: string;
  fingerprint: string;
  result: unknown;
  locked_until: Date | null;
  expires_at: Date;
  /** On an acquired claim: an unreleased record (dead holder, expired outcome) was replaced. */
  taken_over: boolean | null;
}

/** The row of the completion statements: the outcome's expiry as epoch milliseconds. */
export interface CompletedRow extends QueryResultRow {
  expires_ms: number;
}

/** A row of the `find` statement: `until_ms` is the outcome's expiry when completed, else the lease's end (epoch ms). */
interface FoundRow extends QueryResultRow {
  outcome: string;
  fingerprint: string;
  result: unknown;
  until_ms: number | null;
}

/** A row of the batch `find` statement: `n` is the position of its key, from 1. */
interface BatchFoundRow extends FoundRow {
  n: string;
}

interface RecordKey {
  scope: string;
  key: string;
}

/** A row of the batch claim statement: `n` is the position of its request, from 1. */
interface BatchClaimRow extends ClaimRow {
  n: string;
}

/** A row of the batch completion statement. */
interface BatchCompletedRow extends CompletedRow {
  id: string;
}

interface TokenedClaim {
  request: ClaimRequest;
  token: string;
}

interface Completion {
  claim: Claim;
  result: unknown;
  /** The result as JSON (undefined for an undefined result, stored as NULL). */
  json: string | undefined;
}

/**
 * A result whose JSON is longer than this is completed in a statement of its own: a turn of large responses must
 * not make one statement that is too large for any of them (an array literal escapes every quote once more).
 */
const MAX_SHARED_RESULT_CHARS = 64 * 1024;

/** How many times a claim is retried when it lost a race against a row its snapshot could not see yet. */
const CLAIM_RACE_RETRIES = 10;

/**
 * The Postgres store: one prepared `INSERT … ON CONFLICT` per claim against the status-filtered
 * partial unique index, and compare-and-set updates on the lease token for everything after it. Claims made in the
 * same turn of the event loop share one statement, and so do completions and reads.
 */
export class PostgresIdempotencyStore extends IdempotencyStore {
  private statements?: IdempotencySql;
  /**
   * Claims made in the same turn share one statement, one round trip and one commit (see CallBatcher): two claims of
   * one key never do, and after a failure one of its rows may have caused, or a lock wait it gave up
   * (BATCH_LOCK_TIMEOUT_MS), each claim is made again on its own. Completions likewise.
   */
  private readonly claims = new CallBatcher<TokenedClaim, ClaimOutcome>(
    (claims) => this.claimTogether(claims),
    ({ request, token }) => this.claimAlone(request, token),
    { retrySingly: isRowLevelFailure, identity: ({ request }) => `${request.scope}\u0000${request.key}` },
  );
  private readonly completions = new CallBatcher<Completion, CompletedRecord | null>(
    (completions) => this.completeTogether(completions),
    (completion) => this.completeAlone(completion),
    { retrySingly: isRowLevelFailure, identity: ({ claim }) => claim.id },
  );
  /** Reads made in the same turn share one statement (a read has no row to get wrong for another, so no identity). */
  private readonly reads = new CallBatcher<RecordKey, ClaimOutcome | null>(
    (keys) => this.findTogether(keys),
    ({ scope, key }) => this.findAlone(scope, key),
    { retrySingly: isRowLevelFailure },
  );

  /** `connection` is read on each call: the pool is opened at module init, after this store is built. */
  constructor(private readonly connection: StoreConnection & { readonly pool: Pool }) {
    super();
  }

  private get pool(): Pool {
    return this.connection.pool;
  }

  private get sql(): IdempotencySql {
    return (this.statements ??= withPreparedStatements(idempotencySql(this.connection.schema), this.connection.preparedStatements));
  }

  claim(request: ClaimRequest): Promise<ClaimOutcome> {
    return this.claims.call({ request, token: randomUUID() });
  }

  async complete(claim: Claim, result: unknown): Promise<CompletedRecord | null> {
    // Serialized here, so that a result JSON cannot render (a BigInt, a cycle) fails its own call, not its batch's.
    const json: string | undefined = JSON.stringify(result);
    const completion: Completion = { claim, result, json };
    if ((completion.json?.length ?? 0) > MAX_SHARED_RESULT_CHARS) return this.completeAlone(completion);
    return this.completions.call(completion);
  }

  private async claimAlone(request: ClaimRequest, token: string): Promise<ClaimOutcome> {
    const values = [request.scope, request.key, request.fingerprint, token, request.leaseMs, request.ttlMs];
    for (let attempt = 0; attempt < CLAIM_RACE_RETRIES; attempt++) {
      const { rows } = await this.pool.query<ClaimRow>({ ...this.sql.claim, values });
      if (rows.length > 0) return toClaimOutcome(rows[0], request, token);
      // The conflicting row was committed after this statement's snapshot: ask again with a fresh one.
    }
    // Other claims keep changing this key right now: to this caller, it is in progress.
    return { kind: 'in_progress', fingerprint: request.fingerprint, lockedUntil: Date.now() + request.leaseMs };
  }

  private async claimTogether(claims: TokenedClaim[]): Promise<Array<ClaimOutcome | undefined>> {
    const { rows } = await this.pool.query<BatchClaimRow>({
      ...this.sql.claimBatch,
      values: [
        claims.map((c) => c.request.scope),
        claims.map((c) => c.request.key),
        claims.map((c) => c.request.fingerprint),
        claims.map((c) => c.token),
        claims.map((c) => c.request.leaseMs),
        claims.map((c) => c.request.ttlMs),
      ],
    });
    const answers = new Array<ClaimOutcome | undefined>(claims.length);
    for (const row of rows) {
      const i = Number(row.n) - 1;
      answers[i] = toClaimOutcome(row, claims[i].request, claims[i].token);
    }
    return answers;
  }

  private async completeAlone({ claim, result, json }: Completion): Promise<CompletedRecord | null> {
    const { rows } = await this.pool.query<CompletedRow>({
      ...this.sql.complete,
      values: [claim.id, claim.token, json],
    });
    if (rows.length === 0) return null;
    return { fingerprint: claim.fingerprint, result, expiresAt: rows[0].expires_ms };
  }

  private async completeTogether(completions: Completion[]): Promise<Array<CompletedRecord | null>> {
    const { rows } = await this.pool.query<BatchCompletedRow>({
      ...this.sql.completeBatch,
      values: [
        completions.map((c) => c.claim.id),
        completions.map((c) => c.claim.token),
        completions.map((c) => c.json ?? null),
      ],
    });
    const expiries = new Map(rows.map((row) => [String(row.id), row.expires_ms]));
    return completions.map(({ claim, result }) => {
      const expiresAt = expiries.get(claim.id);
      return expiresAt === undefined ? null : { fingerprint: claim.fingerprint, result, expiresAt };
    });
  }

  async release(claim: Claim, error?: unknown): Promise<void> {
    await this.pool.query({
      ...this.sql.release,
      values: [claim.id, claim.token, error === undefined ? null : JSON.stringify(error)],
    });
  }

  async extendLease(claim: Claim): Promise<boolean> {
    const { rowCount } = await this.pool.query({ ...this.sql.extend, values: [claim.id, claim.token, claim.leaseMs] });
    return (rowCount ?? 0) > 0;
  }

  async recentFailure(scope: string, key: string, withinMs: number): Promise<unknown> {
    const { rows } = await this.pool.query<{ error: unknown }>({ ...this.sql.recentFailure, values: [scope, key, Math.ceil(withinMs)] });
    return rows[0]?.error ?? undefined;
  }

  find(scope: string, key: string): Promise<ClaimOutcome | null> {
    return this.reads.call({ scope, key });
  }

  private async findAlone(scope: string, key: string): Promise<ClaimOutcome | null> {
    const { rows } = await this.pool.query<FoundRow>({ name: this.sql.find.name, text: this.sql.find.text, values: [scope, key] });
    return rows.length === 0 ? null : toFoundOutcome(rows[0]);
  }

  private async findTogether(keys: RecordKey[]): Promise<Array<ClaimOutcome | null>> {
    const { rows } = await this.pool.query<BatchFoundRow>({
      ...this.sql.findBatch,
      values: [keys.map((k) => k.scope), keys.map((k) => k.key)],
    });
    const answers = new Array<ClaimOutcome | null>(keys.length).fill(null);
    for (const row of rows) answers[Number(row.n) - 1] = toFoundOutcome(row);
    return answers;
  }
}

/** What a row of the `find` statements means. */
function toFoundOutcome(row: FoundRow): ClaimOutcome {
  if (row.outcome === 'completed') return { kind: 'completed', record: { fingerprint: row.fingerprint, result: row.result, expiresAt: row.until_ms ?? 0 } };
  return { kind: 'in_progress', fingerprint: row.fingerprint, lockedUntil: row.until_ms ?? 0 };
}

/** What a claim statement's row means, for the claim of `request` under `token`. */
export function toClaimOutcome(row: ClaimRow, request: ClaimRequest, token: string): ClaimOutcome {
  switch (row.outcome) {
    case 'acquired':
      return {
        kind: 'acquired',
        claim: { id: String(row.id), scope: request.scope, key: request.key, fingerprint: request.fingerprint, token, leaseMs: request.leaseMs },
        takenOver: row.taken_over === true,
      };
    case 'completed':
      return { kind: 'completed', record: { fingerprint: row.fingerprint, result: row.result, expiresAt: row.expires_at.getTime() } };
    default:
      return { kind: 'in_progress', fingerprint: row.fingerprint, lockedUntil: row.locked_until?.getTime() ?? 0 };
  }
}
