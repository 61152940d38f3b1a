import { Injectable, Logger } from '@nestjs/common';
import { LibraryLogger } from '../observability/library-logger';
import type { ConnectionOptions, Queue } from 'bullmq';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { StepBackoff } from '../workflow/workflow.interfaces';
import { EVENT_CHANNEL, eventSignalKey, JobSignal, wakeJobKey, WorkflowQueues } from '../workflow/workflow-queues';

/** A job of an inline queue: what the step worker and the executor read of a BullMQ job. */
export interface InlineJob {
  id: string;
  name: string;
  data: unknown;
  attemptsMade: number;
}

/** Runs a job of a queue; throwing counts as a failed attempt. */
export type InlineProcessor = (queue: string, job: InlineJob) => Promise<unknown>;

interface JobOptions {
  jobId?: string;
  attempts?: number;
  backoff?: StepBackoff;
  /** Ms before the first attempt (a task's `enqueue({ delay })`). */
  delay?: number;
}

interface Entry {
  job: InlineJob;
  state: 'waiting' | 'active' | 'delayed';
  removed: boolean;
}

/**
 * WorkflowQueues for IdempotencyTestingModule: each queue runs its jobs in this process as soon as they are added,
 * with BullMQ's rules that the executor relies on (a job id is added once while it lives, failed attempts are retried
 * with the job's backoff, a job ends removed), and signals its waiters in process. No Redis, no bullmq import.
 */
@Injectable()
export class InlineWorkflowQueues extends WorkflowQueues {
  private readonly inline = new Map<string, InlineQueue>();
  private processor?: InlineProcessor;

  /** Sets what runs the jobs (the testing module's runner, once every provider exists). */
  setProcessor(processor: InlineProcessor): void {
    this.processor = processor;
  }

  override connection(): ConnectionOptions {
    throw new Error('IdempotencyTestingModule runs workflows in process: there is no BullMQ connection');
  }

  override queue(name: string): Queue {
    let queue = this.inline.get(name);
    if (!queue) {
      queue = new InlineQueue(name, (job) => this.run(name, job), (jobId, signal) => this.notify(name, jobId, signal));
      this.inline.set(name, queue);
    }
    return queue as unknown as Queue;
  }

  override listen(): Promise<void> {
    return Promise.resolve();
  }

  /** In process: the runner of a suspended execution listens for its wake signal. */
  override wakeRun(queue: string, _workflowName: string, executionId: string): Promise<void> {
    this.notify(queue, wakeJobKey(executionId), { kind: 'check' });
    return Promise.resolve();
  }

  override publishEventSet(_queue: string, executionId: string, key: string): Promise<void> {
    this.notify(EVENT_CHANNEL, eventSignalKey(executionId, key), { kind: 'check' });
    return Promise.resolve();
  }

  override publishRunWake(queue: string, executionId: string): Promise<void> {
    this.notify(queue, wakeJobKey(executionId), { kind: 'check' });
    return Promise.resolve();
  }

  /** True when no job is waiting, running or waiting for a retry. */
  get isIdle(): boolean {
    return [...this.inline.values()].every((q) => q.isIdle);
  }

  override async close(): Promise<void> {
    for (const queue of this.inline.values()) queue.close();
    await super.close();
  }

  private run(queue: string, job: InlineJob): Promise<unknown> {
    if (!this.processor) return Promise.reject(new Error(`no processor for queue "${queue}": the testing module is not initialized`));
    return this.processor(queue, job);
  }
}

/** The subset of a BullMQ Queue the executor and the client use. */
class InlineQueue {
  private readonly logger: Logger = new LibraryLogger('Workflows');
  private readonly jobs = new Map<string, Entry>();
  private readonly stop = new AbortController();

  constructor(
    private readonly name: string,
    private readonly process: (job: InlineJob) => Promise<unknown>,
    private readonly signal: (jobId: string, signal: JobSignal) => void,
  ) {}

  get isIdle(): boolean {
    return this.jobs.size === 0;
  }

  add(name: string, data: unknown, options: JobOptions = {}): Promise<InlineJob> {
    const id = options.jobId ?? randomUUID();
    const existing = this.jobs.get(id);
    if (existing) return Promise.resolve(existing.job);
    const entry: Entry = { job: { id, name, data, attemptsMade: 0 }, state: 'waiting', removed: false };
    this.jobs.set(id, entry);
    setImmediate(() => void this.run(entry, options));
    return Promise.resolve(entry.job);
  }

  getJobState(id: string): Promise<string> {
    return Promise.resolve(this.jobs.get(id)?.state ?? 'unknown');
  }

  remove(id: string): Promise<number> {
    const entry = this.jobs.get(id);
    if (!entry || entry.state === 'active') return Promise.resolve(0);
    entry.removed = true;
    this.jobs.delete(id);
    return Promise.resolve(1);
  }

  close(): void {
    this.stop.abort();
  }

  private async run(entry: Entry, options: JobOptions): Promise<void> {
    const { job } = entry;
    if (options.delay && options.delay > 0) {
      entry.state = 'delayed';
      await sleep(options.delay, undefined, { signal: this.stop.signal }).catch(() => undefined);
    }
    while (!entry.removed && !this.stop.signal.aborted) {
      entry.state = 'active';
      try {
        await this.process(job);
        this.drop(entry);
        this.signal(job.id, { kind: 'finished' });
        return;
      } catch (err) {
        job.attemptsMade++;
        const unrecoverable = err instanceof Error && err.name === 'UnrecoverableError';
        if (unrecoverable || job.attemptsMade >= (options.attempts ?? 1)) {
          this.logger.warn(`job ${job.id} of queue "${this.name}" failed: ${err instanceof Error ? err.message : String(err)}`);
          this.drop(entry);
          this.signal(job.id, { kind: 'check' });
          return;
        }
        entry.state = 'delayed';
        await sleep(backoffDelay(options.backoff, job.attemptsMade), undefined, { signal: this.stop.signal }).catch(() => undefined);
      }
    }
    this.drop(entry);
  }

  /** Removes a finished job, unless its id was meanwhile removed and added again as a new job. */
  private drop(entry: Entry): void {
    if (this.jobs.get(entry.job.id) === entry) this.jobs.delete(entry.job.id);
  }
}

/** BullMQ's delay before the next attempt: a number is a fixed delay; exponential doubles it per attempt made. */
function backoffDelay(backoff: StepBackoff | undefined, attemptsMade: number): number {
  if (backoff === undefined) return 0;
  if (typeof backoff === 'number') return backoff;
  return backoff.type === 'exponential' ? backoff.delay * 2 ** (attemptsMade - 1) : backoff.delay;
}
