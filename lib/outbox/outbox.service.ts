import { Inject, Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { OutboxMessageInvalidError } from '../errors/outbox-message-invalid.error';
import { OutboxMessageNotFoundError } from '../errors/outbox-message-not-found.error';
import { OutboxNotInTransactionError } from '../errors/outbox-not-in-transaction.error';
import { OutboxTopicUnknownError } from '../errors/outbox-topic-unknown.error';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { IdempotencyConnections } from '../storage/idempotency-connections';
import { uuidv7 } from '../workflow/uuidv7';
import type { OutboxCounts, OutboxMessage, OutboxMessageInfo, OutboxMessageStatus, OutboxStats } from './outbox.interfaces';
import { outboxSql } from './outbox.sql';

const MAX_ID_LENGTH = 200;

/**
 * The transactional outbox: `publish()` stores messages in the caller's transaction (a rollback leaves none), and
 * the relay on every instance delivers them at least once, in publish order per key. `stats()`, `messages()`,
 * `retry(id)` and `skip(id)` inspect and re-drive what was stored.
 */
@Injectable()
export class OutboxService {
  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly connections: IdempotencyConnections,
  ) {}

  /** Stores one message in the transaction of `manager`; resolves with its id. */
  publish(manager: EntityManager, message: OutboxMessage): Promise<string>;
  /** Stores messages in the transaction of `manager`, in the order given; resolves with their ids. */
  publish(manager: EntityManager, messages: readonly OutboxMessage[]): Promise<string[]>;
  async publish(manager: EntityManager, messages: OutboxMessage | readonly OutboxMessage[]): Promise<string | string[]> {
    const list = Array.isArray(messages) ? (messages as readonly OutboxMessage[]) : [messages as OutboxMessage];
    if (!manager?.queryRunner?.isTransactionActive) throw new OutboxNotInTransactionError();
    const ids = list.map((m) => this.check(m));
    if (list.length > 0) {
      const sql = this.sql();
      await manager.query(sql.publish, [
        ids,
        list.map((m) => m.topic),
        list.map((m) => m.key ?? null),
        list.map((m) => JSON.stringify(m.payload ?? null)),
        list.map((m) => JSON.stringify(m.headers ?? {})),
        list.map((m) => m.availableAt?.toISOString() ?? null),
        sql.channel,
      ]);
    }
    return Array.isArray(messages) ? ids : ids[0];
  }

  /** Pending, delivered, dead and skipped counts, in total and per topic, with the age of the oldest pending message. */
  async stats(): Promise<OutboxStats> {
    const { rows } = await this.connections.pool.query<{ topic: string; status: OutboxMessageStatus; n: number; oldest_ms: number }>(this.sql().stats);
    const empty = (): OutboxCounts => ({ pending: 0, delivered: 0, dead: 0, skipped: 0, oldestPendingAgeMs: null });
    const stats: OutboxStats = { ...empty(), topics: {} };
    for (const r of rows) {
      const topic = (stats.topics[r.topic] ??= empty());
      topic[r.status] = r.n;
      stats[r.status] += r.n;
      if (r.status === 'pending') {
        topic.oldestPendingAgeMs = Math.max(0, Math.round(r.oldest_ms));
        stats.oldestPendingAgeMs = Math.max(stats.oldestPendingAgeMs ?? 0, topic.oldestPendingAgeMs);
      }
    }
    return stats;
  }

  /** Stored messages in publish order, e.g. `messages({ status: 'dead' })`. Default limit 100. */
  async messages(filter: { status?: OutboxMessageStatus; topic?: string; limit?: number } = {}): Promise<OutboxMessageInfo[]> {
    const { rows } = await this.connections.pool.query<Record<string, unknown>>(this.sql().list, [filter.status ?? null, filter.topic ?? null, filter.limit ?? 100]);
    return rows.map((r) => ({
      id: r.id as string,
      topic: r.topic as string,
      key: r.key as string | null,
      payload: r.payload,
      headers: r.headers as Record<string, string>,
      status: r.status as OutboxMessageStatus,
      attempts: r.attempts as number,
      lastError: r.last_error as string | null,
      createdAt: r.created_at as Date,
      availableAt: r.available_at as Date,
      deliveredAt: r.delivered_at as Date | null,
    }));
  }

  /** Re-drives a dead (or skipped) message: pending again with fresh attempts. False when it is not dead or skipped. */
  async retry(id: string): Promise<boolean> {
    return this.transition(this.sql().retry, id);
  }

  /** Gives up on a dead message for good, so later messages of its key go on. False when it is not dead. */
  async skip(id: string): Promise<boolean> {
    return this.transition(this.sql().skip, id);
  }

  private async transition(text: string, id: string): Promise<boolean> {
    const { rowCount } = await this.connections.pool.query(text, [id]);
    if ((rowCount ?? 0) > 0) {
      await this.connections.pool.query('SELECT pg_notify($1, \'\')', [this.sql().channel]);
      return true;
    }
    const { rows } = await this.connections.pool.query(this.sql().exists, [id]);
    if (rows.length === 0) throw new OutboxMessageNotFoundError(id);
    return false;
  }

  private check(message: OutboxMessage): string {
    const topics = this.options.outbox?.topics;
    if (typeof message !== 'object' || message === null) throw new OutboxMessageInvalidError(`expected { topic, payload, id?, key?, headers?, availableAt? }, got ${String(message)}`);
    if (!topics || !topics.has(message.topic)) throw new OutboxTopicUnknownError(String(message.topic), topics ? [...topics.keys()] : []);
    const id = message.id ?? uuidv7();
    if (typeof id !== 'string' || id.length === 0 || id.length > MAX_ID_LENGTH) {
      throw new OutboxMessageInvalidError(`id must be a non-empty string of at most ${MAX_ID_LENGTH} characters, got ${JSON.stringify(id)}`);
    }
    if (topics.get(message.topic)?.to === 'bullmq' && (id.includes(':') || /^\d+$/.test(id))) {
      throw new OutboxMessageInvalidError(`id "${id}" cannot be a BullMQ job id (no ":" and not a plain integer); leave id unset for a UUIDv7`);
    }
    if (message.key !== undefined && (typeof message.key !== 'string' || message.key.length === 0)) {
      throw new OutboxMessageInvalidError(`key must be a non-empty string, got ${JSON.stringify(message.key)}`);
    }
    if (message.availableAt !== undefined && !(message.availableAt instanceof Date && !isNaN(message.availableAt.getTime()))) {
      throw new OutboxMessageInvalidError('availableAt must be a valid Date');
    }
    return id;
  }

  private sql(): ReturnType<typeof outboxSql> {
    return outboxSql(this.connections.schema, this.options.outbox?.deadBlocksKey ?? true);
  }
}
