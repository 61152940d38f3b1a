import { Inject, Injectable, Logger } from '@nestjs/common';
import type { ConnectionOptions, Queue, QueueEvents } from 'bullmq';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { loadPeer } from '../utils/optional-peer';

/** What a waiter hears about a job: it completed (with its return value), or something happened worth checking. */
export type JobSignal = { kind: 'completed'; value: unknown } | { kind: 'check' };

/** The job id of an execution's workflow run (BullMQ forbids ':' in custom ids). */
export function workflowJobId(executionId: string): string {
  return `wf-${executionId}`;
}

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
  private readonly logger = new Logger('Workflows');
  private readonly queues = new Map<string, Queue>();
  private readonly events = new Map<string, QueueEvents>();
  private readonly waiters = new Map<string, Set<(signal: JobSignal) => void>>();
  private closed = false;

  constructor(@Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions) {}

  /** The BullMQ key prefix. */
  get prefix(): string {
    return this.options.workflows.queuePrefix;
  }

  /** Connection settings for BullMQ (each Queue, Worker and QueueEvents opens its own connections). */
  connection(): ConnectionOptions {
    const redis = this.options.redis;
    if (!redis) throw new Error('workflows need Redis: set the `redis` option of IdempotencyModule');
    const c = redis.connection;
    const common = { maxRetriesPerRequest: null, enableOfflineQueue: true, lazyConnect: false };
    if ('url' in c) return { url: c.url, ...common };
    if ('options' in c) return { ...c.options, ...common };
    // BullMQ refuses ioredis key prefixes; its own `prefix` (queuePrefix) namespaces the keys.
    return { ...c.client.options, keyPrefix: undefined, ...common };
  }

  /** The Queue of a name, opened on first use. */
  queue(name: string): Queue {
    let queue = this.queues.get(name);
    if (!queue) {
      const { Queue } = loadPeer('bullmq', 'workflows (@Workflow() classes)');
      queue = new Queue(name, { connection: this.connection(), prefix: this.prefix });
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
      const events = new QueueEvents(name, { connection: this.connection(), prefix: this.prefix });
      events.on('error', (err) => this.logger.warn(`queue events "${name}": ${err.message}`));
      events.on('completed', ({ jobId, returnvalue }) => this.notify(name, jobId, { kind: 'completed', value: parse(returnvalue) }));
      events.on('failed', ({ jobId }) => this.notify(name, jobId, { kind: 'check' }));
      events.on('removed', ({ jobId }) => this.notify(name, jobId, { kind: 'check' }));
      this.events.set(name, events);
      started.push(events);
    }
    await Promise.all(started.map((e) => e.waitUntilReady()));
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
    const all = [...this.events.values(), ...this.queues.values()];
    this.events.clear();
    this.queues.clear();
    await Promise.all(all.map((c) => c.close().catch(() => undefined)));
  }
}

function parse(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  try {
    return JSON.parse(value) as unknown;
  } catch {
    return value;
  }
}
