import type { PoolClient, QueryResultRow } from 'pg';
import type { EntityManager, QueryRunner } from 'typeorm';
import type { Claim, ClaimOutcome, ClaimRequest, CompletedRecord } from '../core/idempotency-record';
import { StoreUnavailableError } from '../errors/store-unavailable.error';
import { IdempotencyConnections } from '../storage/idempotency-connections';
import { idempotencySql, IdempotencySql } from '../storage/postgres/idempotency.sql';
import { ClaimRow, toClaimOutcome } from '../storage/postgres/postgres-idempotency.store';
import { NamedStatement, withPreparedStatements } from '../storage/postgres/statements';
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

  constructor(private readonly connections: IdempotencyConnections) {
    super();
  }

  async begin(isolation: TransactionIsolation, acquireWithinMs: number, outer?: EntityManager): Promise<OpenTransaction> {
    const nested = outer?.queryRunner;
    if (nested && !nested.isReleased && nested.isTransactionActive) {
      await nested.startTransaction(); // a savepoint in the outer transaction
      return this.open(nested, false, await this.defaults(nested));
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
    return this.open(runner, true, defaults);
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

  private open(runner: QueryRunner, owned: boolean, defaults: SessionDefaults): OpenTransaction {
    const sql = (this.statements ??= withPreparedStatements(idempotencySql(this.connections.schema), this.connections.preparedStatements));
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
      async claim(request: ClaimRequest, token: string, waitMs: number): Promise<ClaimOutcome | 'raced' | 'lock timeout'> {
        const values = [
          request.scope, request.key, request.fingerprint, token, request.leaseMs, request.ttlMs,
          String(Math.max(1, Math.ceil(waitMs))), defaults.lockTimeout, String(request.leaseMs),
        ];
        let found: ClaimRow[];
        try {
          found = await run<ClaimRow>(sql.claimInTransaction, values);
        } catch (err) {
          const code = sqlState(err);
          if (code === LOCK_NOT_AVAILABLE) return 'lock timeout';
          if (code === SERIALIZATION_FAILURE || code === DEADLOCK_DETECTED) return 'raced';
          throw err;
        }
        return found.length > 0 ? toClaimOutcome(found[0], request, token) : 'raced';
      },
      async markWork(): Promise<void> {
        await runner.query('SAVEPOINT idempotency_work');
      },
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
