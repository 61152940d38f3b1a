import type { Duration } from '../utils/duration';

/** A message to publish with `OutboxService.publish()`. */
export interface OutboxMessage<P = unknown> {
  /** A topic configured in `outbox.topics`. */
  topic: string;
  /** Any JSON value. */
  payload: P;
  /** The message id consumers deduplicate on (BullMQ job id, inbox id). Default: a new UUIDv7. */
  id?: string;
  /** Messages with the same key are delivered one after another, in publish order; different keys in parallel. */
  key?: string;
  /** String headers passed along with the payload. */
  headers?: Record<string, string>;
  /** Deliver no earlier than this. Default: at commit. */
  availableAt?: Date;
}

/** What a delivery target receives: the message as published, plus its delivery attempt (1 for the first). */
export interface OutboxDelivery<P = unknown> {
  id: string;
  topic: string;
  key: string | null;
  payload: P;
  headers: Record<string, string>;
  /** ISO time of the publishing transaction's insert. */
  publishedAt: string;
  attempt: number;
  /**
   * Set for `@OutboxHandler()` deliveries: aborted (reason `OutboxDeliveryTimeoutError`) when the attempt outlives
   * its delivery timeout. Pass it to your client (`fetch(url, { signal })`) so a hung call stops with the attempt.
   */
  signal?: AbortSignal;
}

/** Where the relay sends a topic: a BullMQ queue (job id = message id) or an `@OutboxHandler(topic)` method. */
export type OutboxTopicTarget =
  | {
      to: 'bullmq';
      /** The BullMQ queue name. */
      queue: string;
      /** BullMQ key prefix of that queue. Default BullMQ's own (`"bull"`). */
      prefix?: string;
    }
  | {
      to: 'handler';
      /** How long one call of this topic's handler may take before the attempt fails. Default `outbox.deliveryTimeout`. */
      timeout?: Duration;
    };

/** The relay that delivers committed messages; it runs on every instance. */
export interface OutboxRelayOptions {
  /** Run the relay in this instance; false makes a publish-only instance. Default true. */
  enabled?: boolean;
  /** Messages claimed per batch (at most one per key). Default 100. */
  batchSize?: number;
  /** How often an idle relay looks for messages when no commit notification arrives. Default `"1s"`. */
  pollInterval?: Duration;
  /** Batches this instance relays at once, each on its own Postgres connection. Default 2. */
  concurrency?: number;
}

/** Delay before the next attempt of a failed delivery. */
export interface OutboxBackoffOptions {
  /** `"exponential"` doubles the delay after each failure; `"fixed"` keeps it. Default `"exponential"`. */
  type?: 'exponential' | 'fixed';
  /** The first delay. Default `"1s"`. */
  delay?: Duration;
  /** The longest delay. Default `"5m"`. */
  maxDelay?: Duration;
}

/** The transactional outbox (`outbox` module option). */
export interface OutboxOptions {
  /** Every topic that may be published, and where it goes. */
  topics: Record<string, OutboxTopicTarget>;
  relay?: OutboxRelayOptions;
  /** How long delivered messages are kept before retention removes them. Default `"7d"`. */
  retention?: Duration;
  /** Failed deliveries after which a message is dead (kept, re-drivable with `retry(id)`). Default 10. */
  maxAttempts?: number;
  backoff?: OutboxBackoffOptions;
  /** A dead message holds back later messages with the same key until it is retried or skipped. Default true. */
  deadBlocksKey?: boolean;
  /**
   * How long one delivery attempt may take (a handler call, or the `addBulk` of a BullMQ queue) before it fails and
   * is retried with backoff, so a hung target cannot hold its key, or the relay's batch, forever. Default `"30s"`.
   */
  deliveryTimeout?: Duration;
}

/** Outbox settings after validation (internal). */
export interface ResolvedOutboxOptions {
  topics: Map<string, ResolvedOutboxTarget>;
  relay: { enabled: boolean; batchSize: number; pollIntervalMs: number; concurrency: number };
  retentionMs: number;
  maxAttempts: number;
  backoff: { factor: number; delayMs: number; maxDelayMs: number };
  deadBlocksKey: boolean;
  deliveryTimeoutMs: number;
}

/** A topic's target after validation (internal): a handler's timeout in milliseconds. */
export type ResolvedOutboxTarget = { to: 'bullmq'; queue: string; prefix?: string } | { to: 'handler'; timeoutMs: number };

/** The life of a message: waiting, delivered, given up after `maxAttempts`, or skipped by hand after it died. */
export type OutboxMessageStatus = 'pending' | 'delivered' | 'dead' | 'skipped';

/** Counts of one topic (or of all topics). */
export interface OutboxCounts {
  pending: number;
  delivered: number;
  dead: number;
  skipped: number;
  /** Age of the oldest pending message in milliseconds; null when none is pending. */
  oldestPendingAgeMs: number | null;
}

/** `OutboxService.stats()`: totals and per topic. */
export interface OutboxStats extends OutboxCounts {
  topics: Record<string, OutboxCounts>;
}

/** One stored message, as `OutboxService.messages()` lists it. */
export interface OutboxMessageInfo {
  id: string;
  topic: string;
  key: string | null;
  payload: unknown;
  headers: Record<string, string>;
  status: OutboxMessageStatus;
  attempts: number;
  lastError: string | null;
  createdAt: Date;
  availableAt: Date;
  deliveredAt: Date | null;
}
