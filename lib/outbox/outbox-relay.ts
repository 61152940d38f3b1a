import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { LibraryLogger } from '../observability/library-logger';
import type { PoolClient, QueryResult } from 'pg';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { IdempotencyConnections } from '../storage/idempotency-connections';
import type { ResolvedOutboxOptions } from './outbox.interfaces';
import { ClaimedRow, inlineParams, outboxSql } from './outbox.sql';
import { OutboxTargets } from './outbox-targets';
import { OutboxWakeup } from './outbox-wakeup';

/** The key of the last keyed row: the claim returns keyed rows in key order, after the unkeyed ones. */
function lastKey(rows: ClaimedRow[]): string | undefined {
  for (let i = rows.length - 1; i >= 0; i--) if (rows[i].key !== null) return rows[i].key as string;
  return undefined;
}

/**
 * Delivers committed outbox messages, on every instance. Each loop claims a batch of key heads with
 * `FOR UPDATE SKIP LOCKED` in a transaction, delivers it while holding the row locks, then marks each message
 * delivered or failed (backoff, dead after `maxAttempts`) and commits. Instances never deliver the same message at
 * once, and a key's next message is claimable only after its predecessor is marked. A relay that dies mid-batch
 * holds nothing: Postgres drops its locks with its connection, and another loop delivers the batch again.
 */
@Injectable()
export class OutboxRelay implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger: Logger = new LibraryLogger('Idempotency');
  private wakeup?: OutboxWakeup;
  private loops: Promise<void>[] = [];
  private stopped = false;
  private lastWarning = 0;

  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly connections: IdempotencyConnections,
    private readonly targets: OutboxTargets,
  ) {}

  onApplicationBootstrap(): void {
    const outbox = this.options.outbox;
    if (!outbox?.relay.enabled) return;
    const sql = outboxSql(this.connections.schema, outbox.deadBlocksKey);
    this.wakeup = new OutboxWakeup(this.connections.pool, sql.channel, outbox.relay.pollIntervalMs);
    this.wakeup.start();
    for (let i = 0; i < outbox.relay.concurrency; i++) this.loops.push(this.loop(outbox, sql));
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    await this.wakeup?.close();
    await Promise.all(this.loops);
  }

  private async loop(outbox: ResolvedOutboxOptions, sql: ReturnType<typeof outboxSql>): Promise<void> {
    const wakeup = this.wakeup as OutboxWakeup;
    // Where this loop's walk over the keys resumes: round robin, so every key gets its turn however many there are.
    let cursor = '';
    while (!this.stopped) {
      let claimed = 0;
      let idleMs = outbox.relay.pollIntervalMs;
      try {
        ({ claimed, cursor, idleMs } = await this.relayBatch(outbox, sql, cursor));
      } catch (err) {
        this.warn(`outbox relay: ${(err as Error).message}; retrying`);
      }
      if (claimed === 0 && !this.stopped) await wakeup.wait(idleMs);
    }
  }

  /**
   * One claim-deliver-mark transaction; resolves with the number of messages claimed, the next key cursor, and, when
   * nothing was claimed, how long to sleep.
   */
  private async relayBatch(
    outbox: ResolvedOutboxOptions,
    sql: ReturnType<typeof outboxSql>,
    cursor: string,
  ): Promise<{ claimed: number; cursor: string; idleMs: number }> {
    const client = await this.connections.pool.connect();
    let broken: Error | undefined;
    // A connection lost while checked out (a Postgres restart mid-delivery) emits 'error' on the client, which would
    // crash the process unhandled; the failing query reports it and the batch is relayed again.
    const lost = (err: Error) => (broken = err);
    client.on('error', lost);
    try {
      // BEGIN goes with the claim, and COMMIT with the last statement: two round trips per batch, not four.
      const { rows, next } = await this.claim(client, outbox.relay.batchSize, sql, cursor);
      if (rows.length === 0) return { claimed: 0, cursor: next, idleMs: await this.idleFor(client, outbox, sql) };
      const outcomes = await this.targets.deliver(
        rows.map((r) => ({
          id: r.id, topic: r.topic, key: r.key, payload: r.payload, headers: r.headers,
          publishedAt: r.created_at.toISOString(), attempt: r.attempts + 1,
        })),
      );
      const delivered = rows.filter((_, i) => outcomes[i] === undefined).map((r) => r.seq);
      const failed = rows.map((r, i) => ({ seq: r.seq, error: outcomes[i] })).filter((f) => f.error !== undefined);
      if (failed.length > 0) {
        const { maxAttempts, backoff } = outbox;
        await client.query(sql.failed, [failed.map((f) => f.seq), failed.map((f) => f.error), maxAttempts, backoff.delayMs, backoff.factor, backoff.maxDelayMs]);
        this.warn(`outbox relay: ${failed.length} deliver${failed.length === 1 ? 'y' : 'ies'} failed (first: ${failed[0].error}); retrying with backoff`);
      }
      const escape = (value: string) => client.escapeLiteral(value);
      await client.query(delivered.length > 0 ? `${inlineParams(sql.delivered, [delivered], escape)}; COMMIT` : 'COMMIT');
      return { claimed: rows.length, cursor: next, idleMs: 0 };
    } catch (err) {
      broken = err as Error;
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.off('error', lost);
      client.release(broken);
    }
  }

  /**
   * Claims up to `limit` messages: unkeyed ones and the heads of the keys after `cursor`, then, when that does not fill
   * the batch, the heads of the keys from the first up to `cursor` (the walk wraps around). The next cursor is the last
   * key claimed, or the start once the walk has come round.
   */
  private async claim(client: PoolClient, limit: number, sql: ReturnType<typeof outboxSql>, cursor: string): Promise<{ rows: ClaimedRow[]; next: string }> {
    const escape = (value: string) => client.escapeLiteral(value);
    const [, claimed] = (await client.query(`BEGIN; ${inlineParams(sql.claim, [limit, cursor, null, true], escape)}`)) as unknown as [QueryResult, QueryResult<ClaimedRow>];
    const first = claimed.rows;
    if (first.length === limit || cursor === '') return { rows: first, next: lastKey(first) ?? (first.length === limit ? cursor : '') };
    const second = (await client.query<ClaimedRow>(sql.claim, [limit - first.length, '', cursor, false])).rows;
    return { rows: [...first, ...second], next: lastKey(second) ?? '' };
  }

  /**
   * How long a loop whose claim found nothing sleeps: until the next retry or `availableAt` falls due (at once if it
   * fell due since the claim looked), at most one poll interval. Asked in the claim's transaction (see nextDue), which
   * it commits.
   */
  private async idleFor(client: PoolClient, outbox: ResolvedOutboxOptions, sql: ReturnType<typeof outboxSql>): Promise<number> {
    const poll = outbox.relay.pollIntervalMs;
    const [{ rows }] = (await client.query(`${sql.nextDue}; COMMIT`)) as unknown as [QueryResult<{ ms: number | null }>, QueryResult];
    const ms = rows[0]?.ms;
    return ms === null || ms === undefined ? poll : Math.min(poll, Math.max(1, Math.ceil(ms)));
  }

  /** At most one warning per poll interval, so an outage does not flood the log. */
  private warn(message: string): void {
    const now = Date.now();
    if (now - this.lastWarning < (this.options.outbox?.relay.pollIntervalMs ?? 1000)) return;
    this.lastWarning = now;
    this.logger.warn(message);
  }
}
