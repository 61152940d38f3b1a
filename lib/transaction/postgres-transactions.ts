import type { PoolClient, QueryResult, QueryResultRow } from 'pg';
import type { EntityManager, QueryRunner } from 'typeorm';
import type { Claim, ClaimRequest, CompletedRecord } from '../core/idempotency-record';
import { StoreUnavailableError } from '../errors/store-unavailable.error';
import { IdempotencyConnections } from '../storage/idempotency-connections';
import { idempotencySql, IdempotencySql } from '../storage/postgres/idempotency.sql';
import { ClaimRow, toClaimOutcome } from '../storage/postgres/postgres-idempotency.store';
import { NamedStatement, withPreparedStatements } from '../storage/postgres/statements';
import { ClaimAttempt, claimStatementText } from './claim-statement';
import { IdempotencyTransactions, OpenTransaction } from './idempotency-transactions';
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
  /** Connections the claim is prepared on (SQL PREPARE; a reconnect makes a new client object). */
  private readonly preparedClients = new WeakSet<PoolClient>();

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
    await connectWithin(runner, acquireWithinMs);
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
    const nested = outer?.queryRunner;
    const owned = !(nested && !nested.isReleased && nested.isTransactionActive);
    const runner = owned ? this.connections.dataSource.createQueryRunner() : nested;
    // Waiting for a connection gives it back itself when it fails or comes too late.
    if (owned) await connectWithin(runner, acquireWithinMs);
    let tx: OpenTransaction | undefined;
    try {
      if (!owned) await runner.startTransaction(); // a savepoint in the outer transaction
      const defaults = await this.defaults(runner);
      tx = this.open(runner, owned);
      const { request, token, waitMs } = claim;
      const values = [
        request.scope, request.key, request.fingerprint, token, request.leaseMs, request.ttlMs,
        String(Math.max(1, Math.ceil(waitMs))), defaults.lockTimeout, String(request.leaseMs),
      ];
      const client = (runner as unknown as { databaseConnection: PoolClient }).databaseConnection;
      const statement = this.sql().claimInTransaction;
      const prepared = owned && statement.name ? await this.preparedOn(client, statement) : undefined;
      const parts = [claimStatementText(client, statement.text, values, prepared), 'SAVEPOINT idempotency_work'];
      if (owned) {
        parts.unshift(`START TRANSACTION ISOLATION LEVEL ${ISOLATION_LEVELS[isolation]}`);
        // TypeORM's own startTransaction would cost a round trip of its own: its state is set as it would set it.
        Object.assign(runner, { isTransactionActive: true, transactionDepth: 1 });
      }
      let results: QueryResult<ClaimRow>[];
      try {
        results = (await client.query<ClaimRow>(parts.join(';\n'))) as unknown as QueryResult<ClaimRow>[];
      } catch (err) {
        const code = sqlState(err);
        if (code === LOCK_NOT_AVAILABLE) return { tx, outcome: 'lock timeout' };
        if (code === SERIALIZATION_FAILURE || code === DEADLOCK_DETECTED) return { tx, outcome: 'raced' };
        throw err;
      }
      const rows = results[owned ? 1 : 0].rows;
      return { tx, outcome: rows.length > 0 ? toClaimOutcome(rows[0], request, token) : 'raced' };
    } catch (err) {
      if (tx) await tx.rollback();
      else if (owned && !runner.isReleased) await runner.release();
      throw err;
    }
  }

  private sql(): IdempotencySql {
    return (this.statements ??= withPreparedStatements(idempotencySql(this.connections.schema), this.connections.preparedStatements));
  }

  /** The name `statement` is prepared under on `client` (with SQL PREPARE, once per connection), for `EXECUTE`. */
  private async preparedOn(client: PoolClient, statement: NamedStatement & { name: string }): Promise<string> {
    const name = `${statement.name}_sql`; // never the name node-postgres prepares statements under itself
    if (!this.preparedClients.has(client)) {
      try {
        await client.query(`PREPARE ${name} AS ${statement.text}`);
      } catch (err) {
        // Prepared already by another module on the same DataSource and schema: the same text under the same name.
        if (sqlState(err) !== DUPLICATE_PREPARED_STATEMENT) throw err;
      }
      this.preparedClients.add(client);
    }
    return name;
  }

  /** Asked on the connection already held, so that it never waits for another one. */
  private defaults(runner: QueryRunner): Promise<SessionDefaults> {
    this.sessionDefaults ??= (runner.query(
      "SELECT current_setting('default_transaction_isolation') AS isolation, current_setting('lock_timeout') AS lock_timeout",
    ) as Promise<{ isolation: string; lock_timeout: string }[]>).then(
      (rows) => ({ isolation: rows[0].isolation, lockTimeout: rows[0].lock_timeout }),
      (err: unknown) => {
        this.sessionDefaults = undefined; // asked again next time
        throw err;
      },
    );
    return this.sessionDefaults;
  }

  private open(runner: QueryRunner, owned: boolean): OpenTransaction {
    const sql = this.sql();
    const rows = async <R>(text: string, values: unknown[] = []): Promise<R[]> => (await runner.query(text, values, true)).records as R[];
    // The library's own statements go to the connection directly, named (prepared once per connection) unless
    // postgres.preparedStatements is off; the handler's go through TypeORM as usual.
    const client = (runner as unknown as { databaseConnection: PoolClient }).databaseConnection;
    const run = async <R extends QueryResultRow>(statement: NamedStatement, values: unknown[]): Promise<R[]> => (await client.query<R>({ ...statement, values })).rows;
    let finished = false;
    return {
      manager: runner.manager,
      nested: !owned,
      query: rows,
      async undoWork(): Promise<void> {
        await runner.query('ROLLBACK TO SAVEPOINT idempotency_work');
      },
      async release(claim: Claim, error: unknown): Promise<void> {
        await run(sql.release, [claim.id, claim.token, error === undefined ? null : JSON.stringify(error)]);
      },
      async recentFailure(scope: string, key: string, withinMs: number): Promise<unknown> {
        return (await run<{ error: unknown }>(sql.recentFailure, [scope, key, Math.ceil(withinMs)]))[0]?.error ?? undefined;
      },
      async ping(): Promise<void> {
        await runner.query('SELECT 1');
      },
      async complete(claim: Claim, result: unknown): Promise<CompletedRecord | null> {
        const rows = await run<{ expires_at: Date }>(sql.complete, [claim.id, claim.token, JSON.stringify(result)]);
        if (rows.length === 0) return null;
        return { fingerprint: claim.fingerprint, result, expiresAt: rows[0].expires_at.getTime() };
      },
      async commit(): Promise<void> {
        if (finished) return;
        finished = true;
        try {
          await runner.commitTransaction();
        } catch (err) {
          await discard(runner, owned, err);
          throw err;
        }
        if (owned) await runner.release();
      },
      async rollback(): Promise<void> {
        if (finished) return;
        finished = true;
        try {
          await runner.rollbackTransaction();
          if (owned) await runner.release();
        } catch (err) {
          await discard(runner, owned, err);
        }
      },
    };
  }
}

interface SessionDefaults {
  isolation: string;
  lockTimeout: string;
}

/** lock_timeout expired while the claim waited for another transaction's claim of the key. */
const LOCK_NOT_AVAILABLE = '55P03';
const SERIALIZATION_FAILURE = '40001';
const DEADLOCK_DETECTED = '40P01';
const DUPLICATE_PREPARED_STATEMENT = '42P05';

/** The SQLSTATE of a failed query (TypeORM's QueryFailedError keeps pg's error as `driverError`). */
function sqlState(err: unknown): string | undefined {
  const e = err as { code?: unknown; driverError?: { code?: unknown } } | null;
  const code = e?.driverError?.code ?? e?.code;
  return typeof code === 'string' ? code : undefined;
}

/** A connection whose transaction could not be ended cleanly is not reused: the pool drops it. */
async function discard(runner: QueryRunner, owned: boolean, err: unknown): Promise<void> {
  if (!owned) return;
  const release = (runner as unknown as { releasePostgresConnection?: (err?: unknown) => Promise<void> }).releasePostgresConnection;
  await (release ? release.call(runner, err instanceof Error ? err : new Error(String(err))) : runner.release());
}

/** Waits at most `withinMs` for a pooled connection; one that arrives later goes straight back. */
async function connectWithin(runner: QueryRunner, withinMs: number): Promise<void> {
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
