import { Inject, Injectable, Optional } from '@nestjs/common';
import { IdempotencyObserver, NoopObserver } from '../observability/idempotency-observer';
import type { EntityManager } from 'typeorm';
import { quoteIdent } from '../storage/postgres/idempotency.sql';
import { withTransaction } from '../transaction/current-transaction';
import { isConflict, runAgainOnConflict } from '../transaction/transaction-conflicts';
import { commitOrThrow, watchFailedStatements } from '../transaction/checked-commit';
import { TransactionAbortedError } from '../errors/transaction-aborted.error';
import { IdempotencyConnections } from '../storage/idempotency-connections';
import { checkInboxIdentifiers } from './inbox-identifiers';

/** What happened to one message. */
export type InboxOutcome<T> = { status: 'processed'; result: T } | { status: 'duplicate' };

/** What happened to a batch: the handler saw only `processed`. */
export interface InboxBatchOutcome<M, T> {
  processed: M[];
  duplicates: M[];
  /** The handler's return value; undefined when every message was a duplicate and the handler did not run. */
  result: T | undefined;
}

/**
 * Processes each message once for at-least-once transports (queues, webhooks, brokers): the message id
 * is recorded with `INSERT … ON CONFLICT DO NOTHING` in the same transaction as the handler's own writes.
 * A crash or an error rolls both back, so a redelivery runs again; a duplicate after commit is skipped. A transaction
 * Postgres aborts for a conflict (a deadlock) runs again in place, up to 10 times.
 * A handler that caught a failed statement's error and returned gets TransactionAbortedError: Postgres aborted the
 * transaction, so nothing committed, the message id included (a savepoint, `manager.transaction(…)`, contains one).
 * A concurrent redelivery waits until the first delivery commits or rolls back; concurrent batches
 * sharing ids lock them in one canonical order, so they queue instead of deadlocking. Inside the handler,
 * `currentTransaction()` returns the same `manager`, so repositories written for the other faces join it.
 */
@Injectable()
export class InboxService {
  @Optional() @Inject(IdempotencyObserver) private readonly observer: IdempotencyObserver = new NoopObserver();
  constructor(private readonly connections: IdempotencyConnections) {}

  /** Runs `handler` in a transaction unless `messageId` was already processed by `consumer`. */
  async process<T>(messageId: string, consumer: string, handler: (manager: EntityManager) => Promise<T>): Promise<InboxOutcome<T>> {
    checkInboxIdentifiers([messageId], consumer);
    const claimed = this.claimedOnce();
    return this.inTransaction(async (manager) => {
      const inserted = await manager.query<unknown[]>(
        `INSERT INTO ${this.table()} (consumer, message_id) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING 1`,
        [consumer, messageId],
      );
      claimed(inserted.length === 0 ? ['replay'] : ['acquired']);
      if (inserted.length === 0) return { status: 'duplicate' } as const;
      return { status: 'processed', result: await withTransaction(manager, () => handler(manager)) } as const;
    });
  }

  /**
   * Records a batch in one transaction and runs `handler` once with only the messages not seen before
   * (duplicates within the batch count once). `idOf` reads a message's id; by default its `id` property.
   */
  async processBatch<M, T>(
    messages: readonly M[],
    consumer: string,
    handler: (manager: EntityManager, fresh: M[]) => Promise<T>,
    idOf: (message: M) => string = (message) => (message as { id: string }).id,
  ): Promise<InboxBatchOutcome<M, T>> {
    const ids = messages.map(idOf);
    checkInboxIdentifiers(ids, consumer);
    const claimed = this.claimedOnce();
    return this.inTransaction(async (manager) => {
      // Row locks are taken in array order: every batch takes them in one canonical order, so two batches
      // sharing ids queue behind each other instead of each holding what the other needs (40P01).
      const rows = await manager.query<{ message_id: string }[]>(
        `INSERT INTO ${this.table()} (consumer, message_id)
         SELECT $1, id FROM unnest($2::text[]) WITH ORDINALITY AS batch(id, position) ORDER BY position
         ON CONFLICT DO NOTHING RETURNING message_id`,
        [consumer, canonicalOrder(ids)],
      );
      const fresh = new Set(rows.map((r) => r.message_id));
      claimed([...new Set(ids)].map((id) => (fresh.has(id) ? 'acquired' : 'replay')));
      const processed: M[] = [];
      const duplicates: M[] = [];
      messages.forEach((message, i) => {
        if (fresh.delete(ids[i])) processed.push(message);
        else duplicates.push(message);
      });
      const result = processed.length > 0 ? await withTransaction(manager, () => handler(manager, processed)) : undefined;
      return { processed, duplicates, result };
    });
  }

  /**
   * Runs `work` in a transaction, and again should Postgres abort it for a conflict (a deadlock under the handler's
   * statements, or a serialization failure where the handler raised the isolation): nothing of it committed, the
   * message id included, and running it again is Postgres's advice — as a redelivery would, without waiting for one.
   */
  private inTransaction<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    return runAgainOnConflict(() => this.transactionOnce(work), isConflict);
  }

  /**
   * `dataSource.transaction(work)`, whose COMMIT is checked: Postgres answers the COMMIT of a transaction that a
   * failed statement aborted with a silent ROLLBACK, and a handler that caught that statement's error would otherwise
   * be reported processed — its message acknowledged with nothing of it committed, its id included.
   */
  private async transactionOnce<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    const runner = this.connections.dataSource.createQueryRunner();
    const statements = watchFailedStatements(runner);
    try {
      await runner.connect();
      await runner.startTransaction();
      let result: T;
      try {
        result = await work(runner.manager);
      } catch (err) {
        await runner.rollbackTransaction().catch(() => undefined);
        throw err;
      }
      await commitOrThrow(runner, () => new TransactionAbortedError('the inbox handler', statements.failure));
      return result;
    } finally {
      await runner.release();
    }
  }

  /** Reports a call's claims to the observer on its first run only: a run again after a conflict claims nothing new. */
  private claimedOnce(): (outcomes: Array<'acquired' | 'replay'>) => void {
    let reported = false;
    return (outcomes) => {
      if (reported) return;
      reported = true;
      for (const outcome of outcomes) this.observer.claimed('inbox', outcome);
    };
  }

  private table(): string {
    return `${quoteIdent(this.connections.schema)}.${quoteIdent('inbox_messages')}`;
  }
}

/** The distinct ids in one fixed order (UTF-16 code units, independent of any collation). */
function canonicalOrder(ids: readonly string[]): string[] {
  return [...new Set(ids)].sort();
}
