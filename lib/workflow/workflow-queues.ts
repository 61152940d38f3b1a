import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { LibraryLogger } from '../observability/library-logger';
import type { ConnectionOptions, Queue, QueueEvents, QueueEventsProducer } from 'bullmq';
import { createHash } from 'node:crypto';
import type { Cluster, ClusterOptions, Redis } from 'ioredis';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { loadPeer } from '../utils/optional-peer';
import { queueJobDefaults } from '../queues/queue-settings';
import { IdempotencyConnections } from '../storage/idempotency-connections';
import { CallBatcher } from '../storage/call-batcher';
import { defaultAppName, derivedQueuePrefix, queuePrefixOf, slotKeyOf } from './queue-prefix';
import type { StepCheckpoint } from './workflow.interfaces';
import type { CheckpointedExecution } from './storage/workflow.store';
import type { RunLock } from './step-job';

/**
 * What a waiter hears about a job: its checkpoint (with the execution as the write saw it), handed over in this
 * process; that it finished (read Postgres: job events never carry results); or that something happened worth
 * checking (a failed attempt, a removal).
 */
export type JobSignal =
  | { kind: 'checkpoint'; checkpoint: StepCheckpoint; execution?: CheckpointedExecution }
  | { kind: 'finished' }
  | { kind: 'check' };

/** Job states in which a job will still run (or is running) without anyone's help. */
export const LIVE_JOB_STATES: ReadonlySet<string> = new Set(['active', 'waiting', 'delayed', 'prioritized', 'waiting-children']);

/**
 * A waiter reads Postgres when an event says its job finished, when the job is gone from Redis, and otherwise only
 * on every this-many polls (`workflows.pollInterval`), as a fallback; the polls in between ask Redis about the job.
 */
export const POSTGRES_FALLBACK_POLLS = 30;

/** The job id of an execution's workflow run (BullMQ forbids ':' in custom ids). */
export function workflowJobId(executionId: string): string {
  return `wf-${executionId}`;
}

/** The in-process signal key that wakes the waits of an execution's run (a message or a child's outcome arrived). */
export function wakeJobKey(executionId: string): string {
  return `wake-${executionId}`;
}

/** The in-process channel on which `setEvent` signals getEvent waiters (keys: `eventSignalKey`). */
export const EVENT_CHANNEL = '\u0000workflow-events';

/** The signal key of one event key of an execution; the key is hashed, so no user data reaches Redis's events stream. */
export function eventSignalKey(executionId: string, key: string): string {
  return `${executionId}\u0000${createHash('sha256').update(key).digest('hex').slice(0, 16)}`;
}

/** Custom events on a workflow queue's events stream: every process that listens to the queue hears them. */
const EVENT_SET = 'idem:event-set';
const RUN_WAKE = 'idem:run-wake';
const EVENTS_MAX_LEN = 10_000;

/** Far enough ahead for a job that only a message or a child wakes (BullMQ keeps delays as scores: a year stays exact). */
export const WAKE_ON_SIGNAL_DELAY_MS = 365 * 86_400_000;

/** The job id of the step at `position` of an execution: deterministic, never derived from the workflow id alone. */
export function stepJobId(executionId: string, position: number): string {
  return `${executionId}-${position}`;
}

/**
 * The BullMQ side: connection settings, one Queue per queue name, one QueueEvents per queue listened to, and
 * in-process notification so a waiter in the same process hears about its job without a Redis round trip.
 */
@Injectable()
export class WorkflowQueues {
  private readonly logger: Logger = new LibraryLogger('Workflows');
  private readonly queues = new Map<string, Queue>();
  private readonly events = new Map<string, QueueEvents>();
  private readonly producers = new Map<string, QueueEventsProducer>();
  private readonly waiters = new Map<string, Set<(signal: JobSignal) => void>>();
  /** Lock reads batched per queue (and slot), see `lockHolds`. */
  private readonly lockReads = new Map<string, CallBatcher<string, string | null>>();
  private basePrefix?: string;
  private cluster?: Cluster;
  private closed = false;

  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    // Optional: a subclass that runs queues in process (the testing module) has no connections and no prefix.
    @Optional() private readonly connections?: IdempotencyConnections,
  ) {}

  /** Settles the key prefix (the configured one, or one derived from the database, schema and app); call at bootstrap. */
  async init(): Promise<void> {
    if (this.basePrefix !== undefined) return;
    const o = this.options.workflows;
    let prefix = o.queuePrefix;
    if (prefix === undefined) {
      if (!this.connections) throw new Error('workflow queues need the Postgres connection to derive their prefix (or workflows.queuePrefix)');
      const { rows } = await this.connections.pool.query<{ database: string }>('SELECT current_database() AS database');
      const app = o.app !== undefined ? { name: o.app, from: 'workflows.app' } : defaultAppName();
      prefix = derivedQueuePrefix(rows[0].database, this.connections.schema, app.name);
      if (app.from === undefined) {
        this.logger.warn(
          `workflow queues: no package.json with a name in the working directory or above the entry script, so the app name is "" ` +
            `(queue prefix ${prefix}). Instances that find a name elsewhere use other queues and may run the same steps twice: set workflows.app`,
        );
      } else {
        this.logger.log(`workflow queues: prefix ${prefix} (database "${rows[0].database}", schema "${this.connections.schema}", app "${app.name}" from ${app.from})`);
      }
    }
    this.basePrefix = prefix;
  }

  /** The BullMQ key prefix of a queue (on a Redis Cluster, with the queue's own hash tag unless the prefix has one). */
  prefixOf(queue: string): string {
    if (this.basePrefix === undefined) throw new Error('workflow queues are not ready yet: call app.init() (or listen()) before using workflows');
    return queuePrefixOf(this.basePrefix, queue, this.isCluster);
  }

  /** True when Redis is a Cluster (given as `redis.cluster` or as an ioredis Cluster client). */
  get isCluster(): boolean {
    const c = this.options.redis ? this.options.redis.connection : undefined;
    return c !== undefined && ('cluster' in c || ('client' in c && c.client.isCluster));
  }

  /**
   * The connection for BullMQ. Standalone: settings, from which each Queue, Worker and QueueEvents opens its own
   * connections. Cluster: one Cluster client owned here, which BullMQ shares for commands and duplicates for its
   * blocking reads (a Cluster's settings cannot be passed as plain connection options).
   */
  connection(): ConnectionOptions {
    const redis = this.options.redis;
    if (!redis) throw new Error('workflows need Redis: set the `redis` option of IdempotencyModule');
    const c = redis.connection;
    const common = { maxRetriesPerRequest: null, enableOfflineQueue: true, lazyConnect: false };
    if ('url' in c) return { url: c.url, ...common };
    if ('options' in c) return { ...c.options, ...common };
    if ('cluster' in c || c.client.isCluster) return (this.cluster ??= this.openCluster());
    // BullMQ refuses ioredis key prefixes; its own `prefix` (queuePrefix) namespaces the keys.
    return { ...(c.client as Redis).options, keyPrefix: undefined, ...common };
  }

  private openCluster(): Cluster {
    const c = (this.options.redis as Exclude<ResolvedOptions['redis'], false>).connection;
    const settings = (options: ClusterOptions): ClusterOptions => ({
      ...options,
      enableOfflineQueue: true,
      lazyConnect: false,
      keyPrefix: undefined,
      redisOptions: { ...options.redisOptions, keyPrefix: undefined, maxRetriesPerRequest: null },
    });
    const { Cluster: ClusterClient } = loadPeer('ioredis', 'redis');
    const cluster = 'cluster' in c
      ? new ClusterClient(c.cluster.nodes, settings(c.cluster.options))
      : (c as { client: Cluster }).client.duplicate(undefined, settings((c as { client: Cluster }).client.options));
    cluster.on('error', (err: Error) => this.logger.warn(`Redis Cluster (workflows): ${err.message}`));
    return cluster;
  }

  /** The Queue of a name, opened on first use. */
  queue(name: string): Queue {
    let queue = this.queues.get(name);
    if (!queue) {
      const { Queue } = loadPeer('bullmq', 'workflows (@Workflow() classes)');
      // `queues.<name>.priority` applies to every job added to the queue.
      queue = new Queue(name, { connection: this.connection(), prefix: this.prefixOf(name), defaultJobOptions: queueJobDefaults(this.options, name) });
      queue.on('error', (err) => this.logger.warn(`queue "${name}": ${err.message}`));
      this.queues.set(name, queue);
    }
    return queue;
  }

  /** Starts listening to job events of the queues; call before adding jobs whose outcome is awaited. */
  async listen(names: string[]): Promise<void> {
    const started: QueueEvents[] = [];
    for (const name of names) {
      if (this.events.has(name)) continue;
      const { QueueEvents } = loadPeer('bullmq', 'workflows (@Workflow() classes)');
      const events = new QueueEvents(name, { connection: this.connection(), prefix: this.prefixOf(name) });
      events.on('error', (err) => this.logger.warn(`queue events "${name}": ${err.message}`));
      events.on('completed', ({ jobId }) => this.notify(name, jobId, { kind: 'finished' }));
      events.on('failed', ({ jobId }) => this.notify(name, jobId, { kind: 'check' }));
      events.on('removed', ({ jobId }) => this.notify(name, jobId, { kind: 'check' }));
      const custom = events as unknown as { on(event: string, listener: (args: { executionId?: string; key?: string }) => void): void };
      custom.on(EVENT_SET, ({ executionId, key }) => this.notify(EVENT_CHANNEL, `${executionId}\u0000${key}`, { kind: 'check' }));
      custom.on(RUN_WAKE, ({ executionId }) => executionId && this.notify(name, wakeJobKey(executionId), { kind: 'check' }));
      this.events.set(name, events);
      started.push(events);
    }
    await Promise.all(started.map((e) => e.waitUntilReady()));
  }

  /**
   * Makes a suspended execution's run due now: its delayed job is promoted, a lost one added again. A job that is
   * active is left alone: the run there checks for a wake after it suspends (see WorkflowWorker).
   */
  async wakeRun(queue: string, workflowName: string, executionId: string): Promise<void> {
    const q = this.queue(queue);
    const jobId = workflowJobId(executionId);
    const job = await q.getJob(jobId);
    if (!job) {
      await q.add(workflowName, { executionId }, { jobId, removeOnComplete: true, removeOnFail: true });
      return;
    }
    // A job that is not delayed (any more) runs anyway: promote() refuses it, which is fine.
    await job.promote().catch(() => undefined);
  }

  /** Tells every process listening to `queue` that an event key of an execution was set (getEvent waiters read it). */
  async publishEventSet(queue: string, executionId: string, key: string): Promise<void> {
    this.notify(EVENT_CHANNEL, eventSignalKey(executionId, key), { kind: 'check' });
    const [, hashed] = eventSignalKey(executionId, key).split('\u0000');
    await this.publish(queue, { eventName: EVENT_SET, executionId, key: hashed });
  }

  /** Tells every process listening to `queue` that a run of the execution should check its waits (a message arrived). */
  async publishRunWake(queue: string, executionId: string): Promise<void> {
    this.notify(queue, wakeJobKey(executionId), { kind: 'check' });
    await this.publish(queue, { eventName: RUN_WAKE, executionId });
  }

  private async publish(queue: string, event: { eventName: string; executionId: string; key?: string }): Promise<void> {
    const { QueueEventsProducer } = loadPeer('bullmq', 'workflows (@Workflow() classes)') as { QueueEventsProducer?: typeof import('bullmq').QueueEventsProducer };
    if (!QueueEventsProducer) return this.publishWithXadd(queue, event);
    let producer = this.producers.get(queue);
    if (!producer) {
      producer = new QueueEventsProducer(queue, { connection: this.connection(), prefix: this.prefixOf(queue) });
      producer.on('error', (err: Error) => this.logger.warn(`queue events producer "${queue}": ${err.message}`));
      this.producers.set(queue, producer);
    }
    // BullMQ's own default length of an events stream: custom events must not trim job events others still read.
    await producer.publishEvent(event, EVENTS_MAX_LEN);
  }

  /** BullMQ before QueueEventsProducer (5.x): the same entry, added to the queue's events stream directly. */
  private async publishWithXadd(queue: string, event: { eventName: string; executionId: string; key?: string }): Promise<void> {
    const fields = ['event', event.eventName, 'executionId', event.executionId, ...(event.key === undefined ? [] : ['key', event.key])];
    await (await this.rawClient(queue)).xadd(this.queue(queue).keys.events, 'MAXLEN', '~', EVENTS_MAX_LEN, '*', ...fields);
  }

  /**
   * Whether `lock.key` (a job's BullMQ lock) still holds `lock.token`; false when the read fails (BullMQ's connection
   * waits for Redis while it is away). The reads of one turn (step jobs that started together) share one MGET.
   */
  async lockHolds(queue: string, lock: RunLock): Promise<boolean> {
    try {
      return (await this.lockReader(queue, lock.key).call(lock.key)) === lock.token;
    } catch {
      return false;
    }
  }

  /** The batcher of lock reads on a queue's client; on a Redis Cluster one per slot, as an MGET must stay in one. */
  private lockReader(queue: string, key: string): CallBatcher<string, string | null> {
    const group = this.onCluster() ? `${queue}\u0000${slotKeyOf(key)}` : queue;
    let reader = this.lockReads.get(group);
    if (!reader) {
      reader = new CallBatcher<string, string | null>(
        async (keys) => (await this.rawClient(queue)).mget(...keys),
        async (one) => (await this.rawClient(queue)).get(one),
      );
      this.lockReads.set(group, reader);
    }
    return reader;
  }

  private onCluster(): boolean {
    const redis = this.options.redis;
    if (!redis) return false;
    const c = redis.connection;
    return 'cluster' in c || ('client' in c && c.client.isCluster === true);
  }

  /** The Redis client of a queue's commands: `getBackend().client` from BullMQ 6, `client` before. */
  private rawClient(queue: string): Promise<Redis | Cluster> {
    const q = this.queue(queue) as unknown as { client?: Promise<Redis | Cluster>; getBackend?: () => { client: Promise<Redis | Cluster> } };
    return q.getBackend ? q.getBackend().client : (q.client as Promise<Redis | Cluster>);
  }

  /** Whether a job is live (will run or is running); undefined when Redis cannot be asked. */
  async isLive(queue: string, jobId: string): Promise<boolean | undefined> {
    try {
      return LIVE_JOB_STATES.has(await this.queue(queue).getJobState(jobId));
    } catch {
      return undefined; // Redis unreachable, or no queues in this instance: the caller reads Postgres
    }
  }

  /** Registers a listener for one job's signals; returns the function that removes it. */
  wait(queue: string, jobId: string, listener: (signal: JobSignal) => void): () => void {
    const key = `${queue}\u0000${jobId}`;
    let set = this.waiters.get(key);
    if (!set) {
      set = new Set();
      this.waiters.set(key, set);
    }
    set.add(listener);
    return () => {
      const current = this.waiters.get(key);
      if (!current) return;
      current.delete(listener);
      if (current.size === 0) this.waiters.delete(key);
    };
  }

  /** Delivers a signal to the listeners of a job in this process. */
  notify(queue: string, jobId: string | undefined, signal: JobSignal): void {
    if (jobId === undefined) return;
    const set = this.waiters.get(`${queue}\u0000${jobId}`);
    if (!set) return;
    for (const listener of [...set]) listener(signal);
  }

  /** True once `close` was called. */
  get isClosed(): boolean {
    return this.closed;
  }

  /** Closes every Queue and QueueEvents opened here. */
  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.events.values(), ...this.queues.values(), ...this.producers.values()];
    this.events.clear();
    this.queues.clear();
    this.producers.clear();
    await Promise.all(all.map((c) => c.close().catch(() => undefined)));
    // Workers have closed before this (beforeApplicationShutdown); nothing shares the Cluster client any more.
    this.cluster?.disconnect();
    this.cluster = undefined;
  }
}
