import type { EntityManager, QueryRunner } from 'typeorm';
import type { Claim, CompletedRecord } from '../core/idempotency-record';
import { StoreUnavailableError } from '../errors/store-unavailable.error';
import { IdempotencyConnections } from '../storage/idempotency-connections';
import { idempotencySql, IdempotencySql } from '../storage/postgres/idempotency.sql';
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
  /** The server's default isolation level, read once: a transaction at that level needs no SET TRANSACTION round trip. */
  private serverDefault?: Promise<string>;

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
    try {
      await runner.startTransaction((await this.isServerDefault(isolation, runner)) ? undefined : ISOLATION_LEVELS[isolation]);
    } catch (err) {
      await runner.release();
      throw new StoreUnavailableError(err);
    }
    return this.open(runner, true);
  }

  /** True when a plain START TRANSACTION already runs at `isolation` (and the DataSource sets no level of its own). */
  private async isServerDefault(isolation: TransactionIsolation, runner: QueryRunner): Promise<boolean> {
    if ((this.connections.dataSource.options as { isolationLevel?: string }).isolationLevel !== undefined) return false;
    // Asked on the connection already held, so that it never waits for another one.
    this.serverDefault ??= (runner.query('SHOW default_transaction_isolation') as Promise<{ default_transaction_isolation: string }[]>).then(
      (rows) => rows[0].default_transaction_isolation,
      (err: unknown) => {
        this.serverDefault = undefined; // asked again next time
        throw err;
      },
    );
    return (await this.serverDefault) === isolation;
  }

  private open(runner: QueryRunner, owned: boolean): OpenTransaction {
    const sql = (this.statements ??= idempotencySql(this.connections.schema));
    let finished = false;
    return {
      manager: runner.manager,
      nested: !owned,
      async query<R>(text: string, values: unknown[]): Promise<R[]> {
        const { records } = await runner.query(text, values, true);
        return records as R[];
      },
      async complete(claim: Claim, result: unknown): Promise<CompletedRecord | null> {
        const { records } = await runner.query(sql.complete.text, [claim.id, claim.token, JSON.stringify(result)], true);
        const rows = records as { expires_at: Date }[];
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
