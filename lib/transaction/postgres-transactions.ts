import type { Pool, PoolClient, QueryResult, QueryResultRow } from 'pg';
import type { EntityManager, QueryRunner } from 'typeorm';
import type { Claim, ClaimRequest, CompletedRecord } from '../core/idempotency-record';
import { StoreUnavailableError } from '../errors/store-unavailable.error';
import { IdempotencyConnections } from '../storage/idempotency-connections';
import { CLAIM_TAKEN_OVER, idempotencySql, IdempotencySql } from '../storage/postgres/idempotency.sql';
import { ClaimRow, CompletedRow, toClaimOutcome } from '../storage/postgres/postgres-idempotency.store';
import { NamedStatement, withPreparedStatements } from '../storage/postgres/statements';
import type { ClaimAttempt } from './claim-statement';
import { InlineStatement, inlineStatementText } from './inline-statement';
import { IdempotencyTransactions, OpenTransaction } from './idempotency-transactions';
import { sqlState } from './sql-state';
import { clientOf, hasSubscribers, watchFailedStatements } from './checked-commit';
import { DeferredStart, startWithFirstStatement } from './start-with-first-statement';
import { isConflict } from './transaction-conflicts';
import type { TransactionIsolation } from './transaction-options';

const ISOLATION_LEVELS = {
  'read committed': 'READ COMMITTED',
  'repeatable read': 'REPEATABLE READ',
  serializable: 'SERIALIZABLE',
} as const;

/** Transactions on the module's own DataSource, so `currentTransaction()` writes to the database that holds the records. */
export class PostgresTransactions extends IdempotencyTransactions {
  private statements?: IdempotencySql;
  /**
   * The session defaults, read once: the isolation level (a transaction at that level needs no SET TRANSACTION
   * round trip) and the lock_timeout a claim restores after its bounded wait.
   */
  private sessionDefaults?: Promise<SessionDefaults>;
  /** The session defaults once read: used without awaiting the promise again. */
  private defaultsRead?: SessionDefaults;
  /**
   * The statements prepared on each connection (SQL PREPARE; a reconnect makes a new client object): the name to
   * EXECUTE, by statement text.
   */
  private readonly prepared = new WeakMap<PoolClient, Map<string, string>>();

  constructor(private readonly connections: IdempotencyConnections) {
    super();
  }

  async begin(isolation: TransactionIsolation, acquireWithinMs: number, outer?: EntityManager): Promise<OpenTransaction> {
    const nested = outer?.queryRunner;
    if (nested && !nested.isReleased && nested.isTransactionActive) {
      await nested.startTransaction(); // a savepoint in the outer transaction
      return this.open(nested, false);
    }
    const runner = this.connections.dataSource.createQueryRunner();
    await connectWithin(runner, acquireWithinMs, this.connections.pool);
    let defaults: SessionDefaults;
    try {
      defaults = await this.defaults(runner);
      const setsItsOwn = (this.connections.dataSource.options as { isolationLevel?: string }).isolationLevel !== undefined;
      await runner.startTransaction(!setsItsOwn && defaults.isolation === isolation ? undefined : ISOLATION_LEVELS[isolation]);
    } catch (err) {
      await runner.release();
      throw new StoreUnavailableError(err);
    }
    return this.open(runner, true);
  }

  async beginWithClaim(
    isolation: TransactionIsolation, acquireWithinMs: number, outer: EntityManager | undefined,
    claim: { request: ClaimRequest; token: string; waitMs: number },
  ): Promise<{ tx: OpenTransaction; outcome: ClaimAttempt }> {
    const { request, token, waitMs } = claim;
    const sql = this.sql();
    const waitsForHolder = waitMs > 0;
    // Without a wait for another claimer, its lock is only tried; any other lock wait is bounded like the pool's.
    const lockTimeout = lockTimeoutSetting(waitsForHolder ? waitMs : acquireWithinMs);
    const first: InlineStatement = {
      statement: sql.claimInTransaction,
      values: [request.scope, request.key, request.fingerprint, token, request.leaseMs, request.ttlMs, lockTimeout, '', String(request.leaseMs), waitsForHolder ? 1 : 0],
    };
    // The completion is prepared with the claim: once the transaction is open, a failing PREPARE would abort it.
    let opened: Awaited<ReturnType<PostgresTransactions['openWith']>>;
    try {
      opened = await this.openWith(isolation, acquireWithinMs, outer, first, [sql.completeInTransaction], (defaults) => {
        first.values[7] = defaults.lockTimeout;
      }, {
        // Before the claim is planned: the records table's own lock is taken then, before the claim's settings apply.
        before: `SET LOCAL lock_timeout = ${lockTimeout}`,
        after: 'SAVEPOINT idempotency_work',
        // Preparing the claim on a new connection locks the records table as well.
        prepareLockTimeout: lockTimeoutSetting(acquireWithinMs),
      });
    } catch (err) {
      // The records table stayed locked for as long as a connection may take (its PREPARE waited): nothing is claimed.
      if (sqlState(err) === LOCK_NOT_AVAILABLE) throw new StoreUnavailableError(err);
      throw err;
    }
    if ('failure' in opened) {
      const code = sqlState(opened.failure);
      if (code === LOCK_NOT_AVAILABLE && waitsForHolder) return { tx: opened.tx, outcome: 'lock timeout' };
      if (code === LOCK_NOT_AVAILABLE) {
        // Not another claimer (its lock was free): the records table stayed locked for as long as a connection may take.
        await opened.tx.rollback();
        throw new StoreUnavailableError(opened.failure);
      }
      if (isConflict(opened.failure)) return { tx: opened.tx, outcome: 'raced' };
      await opened.tx.rollback();
      throw opened.failure;
    }
    const rows = opened.rows as ClaimRow[];
    if (rows.length === 0) return { tx: opened.tx, outcome: 'raced' };
    return { tx: opened.tx, outcome: rows[0].outcome === 'held' ? 'held' : toClaimOutcome(rows[0], request, token) };
  }

  async beginWith(
    isolation: TransactionIsolation, acquireWithinMs: number, first: InlineStatement, prepare: NamedStatement[] = [],
  ): Promise<{ tx: OpenTransaction; rows: QueryResultRow[] }> {
    const opened = await this.openWith(isolation, acquireWithinMs, undefined, first, prepare);
    if ('failure' in opened) {
      await opened.tx.rollback();
      throw opened.failure;
    }
    return opened;
  }

  async beginOnFirstStatement(isolation: TransactionIsolation, acquireWithinMs: number, prepare: NamedStatement[] = []): Promise<OpenTransaction> {
    const runner = this.connections.dataSource.createQueryRunner();
    await connectWithin(runner, acquireWithinMs, this.connections.pool);
    const client = clientOf(runner);
    try {
      if (this.connections.preparedStatements && !this.preparedOn(client, prepare)) await this.prepareOn(client, prepare);
    } catch (err) {
      await runner.release();
      throw new StoreUnavailableError(err);
    }
    const Query = (this.connections.dataSource.driver as unknown as { postgres: { Query: Parameters<typeof startWithFirstStatement>[2] } }).postgres.Query;
    const deferred = startWithFirstStatement(client, `START TRANSACTION ISOLATION LEVEL ${ISOLATION_LEVELS[isolation]}`, Query, () => !runner.isReleased);
    // TypeORM's own startTransaction would send the START now: its state is set as it would set it.
    Object.assign(runner, { isTransactionActive: true, transactionDepth: 1 });
    return this.open(runner, true, deferred);
  }

  /**
   * Opens a transaction (or a savepoint in `outer`'s) whose first statement is `first`, sent in the same round trip
   * as the START TRANSACTION (and `around.before` and `around.after`, when given). `first` and `prepare` are prepared on a new connection of
   * the library's own before the transaction starts. An error of `first` is returned with the still open
   * transaction for the caller to look at and roll back; any other error rolls it back and is thrown.
   */
  private async openWith(
    isolation: TransactionIsolation, acquireWithinMs: number, outer: EntityManager | undefined, first: InlineStatement,
    prepare: NamedStatement[], withDefaults?: (defaults: SessionDefaults) => void,
    around: { before?: string; after?: string; prepareLockTimeout?: string } = {},
  ): Promise<{ tx: OpenTransaction; rows: QueryResultRow[] } | { tx: OpenTransaction; failure: unknown }> {
    const nested = outer?.queryRunner;
    const owned = !(nested && !nested.isReleased && nested.isTransactionActive);
    const runner = owned ? this.connections.dataSource.createQueryRunner() : nested;
    // Waiting for a connection gives it back itself when it fails or comes too late.
    if (owned) await connectWithin(runner, acquireWithinMs, this.connections.pool);
    let tx: OpenTransaction | undefined;
    try {
      if (!owned) await runner.startTransaction(); // a savepoint in the outer transaction
      if (withDefaults) withDefaults(this.defaultsRead ?? (await this.defaults(runner)));
      tx = this.open(runner, owned);
      const client = clientOf(runner);
      const statements = [first.statement, ...prepare];
      // Prepared on this connection already (the usual case): no await, no promise.
      const prepared = owned && this.connections.preparedStatements
        ? (this.preparedOn(client, statements) ?? (await this.prepareOn(client, statements, around.prepareLockTimeout)))
        : undefined;
      const parts = [inlineStatementText(first, prepared?.get(first.statement.text))];
      if (around.before) parts.unshift(around.before);
      if (around.after) parts.push(around.after);
      if (owned) {
        parts.unshift(`START TRANSACTION ISOLATION LEVEL ${ISOLATION_LEVELS[isolation]}`);
        // TypeORM's own startTransaction would cost a round trip of its own: its state is set as it would set it.
        Object.assign(runner, { isTransactionActive: true, transactionDepth: 1 });
      }
      let results: QueryResult[];
      try {
        results = asResults(await client.query(parts.join(';\n')));
      } catch (failure) {
        return { tx, failure };
      }
      return { tx, rows: results[(owned ? 1 : 0) + (around.before ? 1 : 0)].rows as QueryResultRow[] };
    } catch (err) {
      if (tx) await tx.rollback();
      else if (owned && !runner.isReleased) await runner.release();
      throw err;
    }
  }

  private sql(): IdempotencySql {
    return (this.statements ??= withPreparedStatements(idempotencySql(this.connections.schema), this.connections.preparedStatements));
  }

  /** The names `statements` are prepared under on `client`, when all of them are prepared there already. */
  private preparedOn(client: PoolClient, statements: NamedStatement[]): Map<string, string> | undefined {
    const names = this.prepared.get(client);
    return names && statements.every((s) => s.name === undefined || names.has(s.text)) ? names : undefined;
  }

  /**
   * The names `statements` are prepared under on `client` (with SQL PREPARE, once per connection, all in one round
   * trip), by statement text, for `EXECUTE`. Statements without a name are left out (sent as text).
   */
  private async prepareOn(client: PoolClient, statements: NamedStatement[], lockTimeout?: string): Promise<Map<string, string>> {
    let names = this.prepared.get(client);
    if (!names) this.prepared.set(client, (names = new Map<string, string>()));
    const missing = statements.filter((s): s is NamedStatement & { name: string } => s.name !== undefined && !names.has(s.text));
    if (missing.length === 0) return names;
    // never the names node-postgres prepares statements under itself
    const prepares = missing.map((s) => `PREPARE ${s.name}_sql AS ${s.text}`);
    // A PREPARE locks the tables of its statement; SET LOCAL holds for the statements of this one query only.
    const bounded = (text: string) => (lockTimeout === undefined ? text : `SET LOCAL lock_timeout = ${lockTimeout};\n${text}`);
    try {
      await client.query(bounded(prepares.join(';\n')));
    } catch (err) {
      // Prepared already by another module on the same DataSource and schema (the same text under the same name):
      // one by one, so that the others are prepared all the same.
      if (sqlState(err) !== DUPLICATE_PREPARED_STATEMENT) throw err;
      for (const text of prepares) {
        await client.query(bounded(text)).catch((e: unknown) => {
          if (sqlState(e) !== DUPLICATE_PREPARED_STATEMENT) throw e;
        });
      }
    }
    for (const s of missing) names.set(s.text, `${s.name}_sql`);
    return names;
  }

  /** Asked on the connection already held, so that it never waits for another one. */
  private defaults(runner: QueryRunner): Promise<SessionDefaults> {
    this.sessionDefaults ??= (runner.query(
      "SELECT current_setting('default_transaction_isolation') AS isolation, current_setting('lock_timeout') AS lock_timeout",
    ) as Promise<{ isolation: string; lock_timeout: string }[]>).then(
      (rows) => (this.defaultsRead = { isolation: rows[0].isolation, lockTimeout: rows[0].lock_timeout }),
      (err: unknown) => {
        this.sessionDefaults = undefined; // asked again next time
        throw err;
      },
    );
    return this.sessionDefaults;
  }

  /** `deferred`: the START not sent yet (see {@link beginOnFirstStatement}); a transaction that never sent it ends without a statement. */
  private open(runner: QueryRunner, owned: boolean, deferred?: DeferredStart): OpenTransaction {
    const sql = this.sql();
    const rows = async <R>(text: string, values: unknown[] = []): Promise<R[]> => (await runner.query(text, values, true)).records as R[];
    // The library's own statements go to the connection directly, named (prepared once per connection) unless
    // postgres.preparedStatements is off; the handler's go through TypeORM as usual.
    const client = clientOf(runner);
    const prepared = this.prepared;
    // The outer transaction's runner, when nested, is watched by the outer call already.
    const statements = owned ? watchFailedStatements(runner) : { failure: undefined };
    let finished = false;
    /** Ends a transaction whose START was never sent: nothing to tell Postgres. */
    const endUnstarted = async (): Promise<boolean> => {
      if (!deferred || deferred.sent) return false;
      deferred.cancel();
      Object.assign(runner, { isTransactionActive: false, transactionDepth: 0 });
      await runner.release();
      return true;
    };
    const rollback = async (): Promise<void> => {
      if (finished) return;
      finished = true;
      try {
        if (await endUnstarted()) return;
        await runner.rollbackTransaction();
        if (owned) await runner.release();
      } catch (err) {
        await discard(runner, owned, err);
      }
    };
    const commitAfter = async (statements: InlineStatement[], options: { undoWork?: boolean } = {}): Promise<QueryResultRow[][]> => {
      if (finished) throw new Error('the transaction is already finished');
      if (!owned) {
        // Inside an outer transaction: one by one, then the savepoint is released (nothing is durable yet anyway).
        const results: QueryResultRow[][] = [];
        try {
          if (options.undoWork) await rows('ROLLBACK TO SAVEPOINT idempotency_work');
          for (const s of statements) results.push(await rows(s.statement.text, s.values));
        } catch (err) {
          await rollback();
          throw err;
        }
        finished = true;
        await runner.commitTransaction();
        return results;
      }
      finished = true;
      const names = prepared.get(client);
      const parts = statements.map((s) => inlineStatementText(s, names?.get(s.statement.text)));
      if (options.undoWork) parts.unshift('ROLLBACK TO SAVEPOINT idempotency_work');
      parts.push('COMMIT');
      let results: QueryResult[];
      try {
        if (hasSubscribers(runner)) await runner.broadcaster.broadcast('BeforeTransactionCommit');
        results = asResults(await client.query(parts.join(';\n')));
      } catch (err) {
        // A statement failed before the COMMIT (the transaction is aborted) or the COMMIT did: end it either way.
        await endAfterFailure(runner, client, err);
        throw err;
      }
      // TypeORM's own commitTransaction would cost a round trip of its own: its state is set as it would set it.
      Object.assign(runner, { isTransactionActive: false, transactionDepth: 0 });
      try {
        if (hasSubscribers(runner)) await runner.broadcaster.broadcast('AfterTransactionCommit');
      } finally {
        await runner.release();
      }
      const first = options.undoWork ? 1 : 0;
      return results.slice(first, first + statements.length).map((r) => r.rows as QueryResultRow[]);
    };
    return {
      manager: runner.manager,
      get abortedBy() {
        return statements.failure;
      },
      query: rows,
      async completeAndCommit(claim: Claim, result: unknown, undoWork: boolean): Promise<CompletedRecord | null> {
        let found: QueryResultRow[][];
        try {
          found = await commitAfter([{ statement: sql.completeInTransaction, values: [claim.id, claim.token, JSON.stringify(result)] }], { undoWork });
        } catch (err) {
          if (err instanceof Error && err.message.includes(CLAIM_TAKEN_OVER)) return null;
          throw err;
        }
        return { fingerprint: claim.fingerprint, result, expiresAt: (found[0][0] as CompletedRow).expires_ms };
      },
      async releaseAndCommit(claim: Claim, error: unknown, undoWork: boolean): Promise<void> {
        await commitAfter([{ statement: sql.release, values: [claim.id, claim.token, error === undefined ? null : JSON.stringify(error)] }], { undoWork });
      },
      commitAfter,
      async recentFailure(scope: string, key: string, withinMs: number): Promise<unknown> {
        return (await client.query<{ error: unknown }>({ ...sql.recentFailure, values: [scope, key, Math.ceil(withinMs)] })).rows[0]?.error ?? undefined;
      },
      async ping(): Promise<void> {
        await runner.query('SELECT 1');
      },
      async commit(): Promise<void> {
        if (finished) return;
        finished = true;
        try {
          if (await endUnstarted()) return;
          await runner.commitTransaction();
        } catch (err) {
          await discard(runner, owned, err);
          throw err;
        }
        if (owned) await runner.release();
      },
      rollback,
    };
  }
}

interface SessionDefaults {
  isolation: string;
  lockTimeout: string;
}

/** A `lock_timeout` value for a wait of `ms`: whole milliseconds, at least 1 (0 would mean no bound). */
function lockTimeoutSetting(ms: number): string {
  return String(Math.max(1, Math.ceil(ms)));
}

/** lock_timeout expired while the claim waited for a lock. */
const LOCK_NOT_AVAILABLE = '55P03';
const DUPLICATE_PREPARED_STATEMENT = '42P05';

/** node-postgres answers a query of several statements with one result each, a single statement with one result. */
function asResults(reply: QueryResult<QueryResultRow> | QueryResult<QueryResultRow>[]): QueryResult<QueryResultRow>[] {
  return Array.isArray(reply) ? reply : [reply];
}

/**
 * Ends the transaction after a failed one-round-trip ending: a ROLLBACK for a statement that failed before the
 * COMMIT (harmless when the COMMIT itself failed), then the connection goes back to the pool, or is dropped when
 * even that failed.
 */
async function endAfterFailure(runner: QueryRunner, client: PoolClient, err: unknown): Promise<void> {
  Object.assign(runner, { isTransactionActive: false, transactionDepth: 0 });
  try {
    await client.query('ROLLBACK');
  } catch {
    await discard(runner, true, err);
    return;
  }
  await runner.release();
}

/** A connection whose transaction could not be ended cleanly is not reused: the pool drops it. */
async function discard(runner: QueryRunner, owned: boolean, err: unknown): Promise<void> {
  if (!owned) return;
  const release = (runner as unknown as { releasePostgresConnection?: (err?: unknown) => Promise<void> }).releasePostgresConnection;
  await (release ? release.call(runner, err instanceof Error ? err : new Error(String(err))) : runner.release());
}

/**
 * Waits at most `withinMs` for a pooled connection; one that arrives later goes straight back. With an idle
 * connection in `pool` and nobody waiting, the pool hands it over at once: no timer then.
 */
async function connectWithin(runner: QueryRunner, withinMs: number, pool: Pool): Promise<void> {
  if (pool.idleCount > 0 && pool.waitingCount === 0) {
    try {
      await runner.connect();
    } catch (err) {
      await runner.release();
      throw new StoreUnavailableError(err);
    }
    return;
  }
  let timer: NodeJS.Timeout | undefined;
  let timedOut = false;
  const connecting = runner.connect();
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      timedOut = true;
      reject(new StoreUnavailableError(new Error(`no Postgres connection became free within ${withinMs} ms (every pooled connection is in use)`)));
    }, withinMs);
  });
  try {
    await Promise.race([connecting, timeout]);
  } catch (err) {
    if (timedOut) void connecting.then(() => runner.release(), () => undefined);
    else await runner.release();
    throw err instanceof StoreUnavailableError ? err : new StoreUnavailableError(err);
  } finally {
    clearTimeout(timer);
  }
}
