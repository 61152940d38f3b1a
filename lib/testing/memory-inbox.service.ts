import type { EntityManager } from 'typeorm';
import type { InboxBatchOutcome, InboxOutcome, InboxService } from '../inbox/inbox.service';
import { IdempotencyError } from '../errors/idempotency.error';
import { checkInboxIdentifiers } from '../inbox/inbox-identifiers';

/** An inbox handler used its EntityManager under IdempotencyTestingModule, which has no database. */
export class NoDatabaseInTestModeError extends IdempotencyError {
  readonly code = 'NO_DATABASE_IN_TEST_MODE';

  constructor(readonly property: string) {
    super(
      `IdempotencyTestingModule has no database: the inbox handler used manager.${property}. ` +
        'Test the handler\'s database writes against Postgres with IdempotencyModule, or keep them out of the unit under test.',
    );
    this.name = 'NoDatabaseInTestModeError';
  }
}

/** What an inbox handler receives in test mode: there is no database, so any use says so. */
const NO_DATABASE = new Proxy({} as EntityManager, {
  get(_target, property) {
    if (property === 'then') return undefined; // not a thenable
    throw new NoDatabaseInTestModeError(String(property));
  },
});

/**
 * The InboxService of IdempotencyTestingModule: each (consumer, message id) is processed once; a handler that
 * throws records nothing (as a rolled-back transaction), so a redelivery runs again; a concurrent redelivery waits
 * for the first one to finish. The handler's `manager` is not a database in test mode.
 */
export class MemoryInboxService implements Pick<InboxService, 'process' | 'processBatch'> {
  private readonly seen = new Map<string, number>();
  private readonly inFlight = new Map<string, Promise<unknown>>();

  async process<T>(messageId: string, consumer: string, handler: (manager: EntityManager) => Promise<T>): Promise<InboxOutcome<T>> {
    const outcome = await this.processBatch([messageId], consumer, (manager) => handler(manager), (id) => id);
    return outcome.processed.length > 0 ? { status: 'processed', result: outcome.result as T } : { status: 'duplicate' };
  }

  async processBatch<M, T>(
    messages: readonly M[],
    consumer: string,
    handler: (manager: EntityManager, fresh: M[]) => Promise<T>,
    idOf: (message: M) => string = (message) => (message as { id: string }).id,
  ): Promise<InboxBatchOutcome<M, T>> {
    const ids = messages.map(idOf);
    checkInboxIdentifiers(ids, consumer);
    const keys = ids.map((id) => `${consumer.length}:${consumer}|${id}`);
    const unique = [...new Set(keys)];
    // Wait for deliveries of the same ids in progress, as the row locks of a transaction would.
    for (let busy = this.busyWith(unique); busy.length > 0; busy = this.busyWith(unique)) {
      await Promise.all(busy.map((running) => running.catch(() => undefined)));
    }
    const processed: M[] = [];
    const duplicates: M[] = [];
    const fresh = new Set(unique.filter((k) => !this.seen.has(k)));
    messages.forEach((message, i) => (fresh.delete(keys[i]) ? processed.push(message) : duplicates.push(message)));
    const mine = unique.filter((k) => !this.seen.has(k));
    if (processed.length === 0) return { processed, duplicates, result: undefined };
    const running = Promise.resolve().then(() => handler(NO_DATABASE, processed));
    for (const k of mine) this.inFlight.set(k, running);
    try {
      const result = await running;
      for (const k of mine) this.seen.set(k, Date.now());
      return { processed, duplicates, result };
    } finally {
      for (const k of mine) this.inFlight.delete(k);
    }
  }

  private busyWith(keys: string[]): Promise<unknown>[] {
    return keys.flatMap((k) => this.inFlight.get(k) ?? []);
  }

  /** Forgets ids seen more than `olderThanMs` ago (retention.inbox); returns how many. */
  prune(olderThanMs: number): number {
    const before = Date.now() - olderThanMs;
    let removed = 0;
    for (const [k, at] of this.seen) {
      if (at < before) {
        this.seen.delete(k);
        removed++;
      }
    }
    return removed;
  }
}
