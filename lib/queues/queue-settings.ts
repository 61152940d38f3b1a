import { Inject, Injectable } from '@nestjs/common';
import { IdempotencyConfigError } from '../errors/idempotency-config.error';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';

/** What a worker creator applies to one queue (see {@link QueueSettings.for}). */
export interface QueueRuntimeSettings {
  /** BullMQ Worker options: `concurrency` (per instance) and, with a `rateLimit`, the queue-wide `limiter`. */
  worker: { concurrency: number; limiter?: { max: number; duration: number } };
  /** BullMQ job options for every job added to the queue (its `priority`, when set). */
  job: { priority?: number };
  /** Retention of finished executions on this queue (ms), when the queue sets one. */
  retentionMs?: number;
}

/** The BullMQ default job options of a queue: what `Queue.add` applies to every job of it. */
export function queueJobDefaults(options: Pick<ResolvedOptions, 'queues'>, queue: string): { priority?: number } {
  const priority = options.queues?.[queue]?.priority;
  return priority === undefined ? {} : { priority };
}

/**
 * The per-queue settings of the `queues` module option, for every kind of queue: workflow and step queues here,
 * task queues by registering theirs. Each worker creator calls `for(queue, defaultConcurrency)`; each owner of
 * queues calls `declare(...)` at module init, and `assertKnown()` at bootstrap refuses names nobody declared.
 */
@Injectable()
export class QueueSettings {
  private readonly known = new Set<string>();
  /** Queues whose jobs are executions (workflows, tasks), as opposed to queues that carry only steps. */
  private readonly executionQueues = new Set<string>();

  constructor(@Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions) {}

  /** The settings to apply to a queue; `defaultConcurrency` is used unless the queue sets its own. */
  for(queue: string, defaultConcurrency: number): QueueRuntimeSettings {
    const q = this.options.queues?.[queue] ?? {};
    return {
      worker: {
        concurrency: q.concurrency ?? defaultConcurrency,
        ...(q.rateLimit ? { limiter: { max: q.rateLimit.max, duration: q.rateLimit.durationMs } } : {}),
      },
      job: queueJobDefaults(this.options, queue),
      ...(q.retentionMs === undefined ? {} : { retentionMs: q.retentionMs }),
    };
  }

  /** Retention (ms) of finished executions on a queue, when `queues.<name>.retention` or `retention.queues.<name>` sets one. */
  retentionOf(queue: string): number | undefined {
    return this.options.retention.queuesMs[queue];
  }

  /**
   * Records queue names that this application uses, for {@link assertKnown}: `carries` says whether their jobs are
   * executions (workflow and task queues) or only steps.
   */
  declare(names: Iterable<string>, carries: 'executions' | 'steps' = 'executions'): void {
    for (const name of names) {
      this.known.add(name);
      if (carries === 'executions') this.executionQueues.add(name);
    }
  }

  /**
   * Throws IdempotencyConfigError when `queues` or `retention.queues` names a queue that no workflow, step or task
   * uses (a misspelt name would silently leave that queue at the default), or gives a retention to a queue that
   * carries only steps (retention keeps finished executions, which belong to the queue of their workflow or task: it
   * would silently do nothing there).
   */
  assertKnown(): void {
    const known = [...this.known].sort();
    const list = known.length > 0 ? `known queues: ${known.map((n) => `"${n}"`).join(', ')}` : 'no workflow, step or task of this application uses a queue';
    const problems = Object.keys(this.options.queues ?? {})
      .filter((name) => !this.known.has(name))
      .map((name) => `queues.${name}: no workflow, step or task uses queue "${name}" (${list}); fix the name or remove the entry`);
    for (const name of Object.keys(this.options.retention.queuesMs)) {
      if (!this.known.has(name) && this.options.queues?.[name] === undefined) {
        problems.push(`retention.queues.${name}: no workflow or task uses queue "${name}" (${list}); fix the name or remove the entry`);
      }
      if (!this.known.has(name) || this.executionQueues.has(name)) continue;
      const option = this.options.queues?.[name]?.retentionMs === undefined ? `retention.queues.${name}` : `queues.${name}.retention`;
      problems.push(`${option}: queue "${name}" carries only steps, and retention keeps finished executions, which live on their workflow's or task's queue; set it there (or @Workflow({ retention })) and remove it here`);
    }
    if (problems.length > 0) throw new IdempotencyConfigError(problems);
  }
}
