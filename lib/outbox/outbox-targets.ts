import { Inject, Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { LibraryLogger } from '../observability/library-logger';
import type { Queue } from 'bullmq';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { OutboxDeliveryTimeoutError } from '../errors/outbox-delivery-timeout.error';
import { loadPeer } from '../utils/optional-peer';
import { WorkflowQueues } from '../workflow/workflow-queues';
import { OutboxHandlers } from './outbox-handlers';
import type { OutboxDelivery } from './outbox.interfaces';

/** Per message of a batch: undefined when delivered, else why it failed. */
export type DeliveryOutcome = string | undefined;

/**
 * Sends a batch of claimed messages to their topics' targets: one `addBulk` per BullMQ queue (job id = message id,
 * so a re-delivery after a crash finds the job it already added) and one call per message to handler topics.
 */
@Injectable()
export class OutboxTargets implements OnApplicationShutdown {
  private readonly logger: Logger = new LibraryLogger('Idempotency');
  private readonly queues = new Map<string, Queue>();

  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly handlers: OutboxHandlers,
    private readonly workflowQueues: WorkflowQueues,
  ) {}

  /** Delivers every message; never throws: each message gets its own outcome. */
  async deliver(batch: OutboxDelivery[]): Promise<DeliveryOutcome[]> {
    const outcomes: DeliveryOutcome[] = new Array<DeliveryOutcome>(batch.length).fill(undefined);
    const byQueue = new Map<string, number[]>();
    const calls: Promise<void>[] = [];
    batch.forEach((delivery, i) => {
      const target = this.options.outbox?.topics.get(delivery.topic);
      if (target?.to === 'bullmq') {
        const name = `${target.prefix ?? ''}\u0000${target.queue}`;
        byQueue.set(name, [...(byQueue.get(name) ?? []), i]);
        return;
      }
      const handler = target?.to === 'handler' ? this.handlers.get(delivery.topic) : undefined;
      if (!handler || target?.to !== 'handler') {
        outcomes[i] = `no target for topic "${delivery.topic}" in this instance's outbox.topics`;
        return;
      }
      calls.push(
        (async () => {
          const abort = new AbortController();
          try {
            await withTimeout(Promise.resolve().then(() => handler({ ...delivery, signal: abort.signal })), target.timeoutMs, delivery, abort);
          } catch (err) {
            outcomes[i] = describe(err);
          }
        })(),
      );
    });
    for (const [name, indexes] of byQueue) {
      calls.push(
        (async () => {
          try {
            const jobs = indexes.map((i) => ({ name: batch[i].topic, data: jobData(batch[i]), opts: { jobId: batch[i].id } }));
            // A late addBulk after the timeout may still add the jobs: the retry finds them by job id and adds nothing.
            await withTimeout(this.queue(name).addBulk(jobs), this.options.outbox?.deliveryTimeoutMs ?? 30_000, batch[indexes[0]]);
          } catch (err) {
            for (const i of indexes) outcomes[i] = describe(err);
          }
        })(),
      );
    }
    await Promise.all(calls);
    return outcomes;
  }

  async onApplicationShutdown(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close().catch(() => undefined)));
  }

  private queue(name: string): Queue {
    let queue = this.queues.get(name);
    if (!queue) {
      const [prefix, queueName] = name.split('\u0000');
      const { Queue } = loadPeer('bullmq', 'the outbox bullmq target');
      queue = new Queue(queueName, { connection: this.workflowQueues.connection(), ...(prefix ? { prefix } : {}) });
      queue.on('error', (err) => this.logger.warn(`outbox queue "${queueName}": ${err.message}`));
      this.queues.set(name, queue);
    }
    return queue;
  }
}

/** The job data a BullMQ consumer receives: the delivery without the relay's attempt counter. */
function jobData(delivery: OutboxDelivery): Omit<OutboxDelivery, 'attempt'> {
  return { id: delivery.id, topic: delivery.topic, key: delivery.key, payload: delivery.payload, headers: delivery.headers, publishedAt: delivery.publishedAt };
}

/**
 * Settles with `work`, or rejects with OutboxDeliveryTimeoutError after `ms` (aborting `abort` with it) while `work`
 * goes on unobserved: the attempt is failed and retried, whatever the hung call does later.
 */
async function withTimeout<T>(work: Promise<T>, ms: number, delivery: OutboxDelivery, abort?: AbortController): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const err = new OutboxDeliveryTimeoutError(delivery.id, delivery.topic, ms);
      abort?.abort(err);
      reject(err);
    }, ms);
  });
  work.catch(() => undefined); // a late failure of an abandoned attempt is not unhandled
  try {
    return await Promise.race([work, expired]);
  } finally {
    clearTimeout(timer);
  }
}

function describe(err: unknown): string {
  return (err instanceof Error ? `${err.name}: ${err.message}` : String(err)).slice(0, 2000);
}
