import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { LibraryLogger } from '../observability/library-logger';
import { IdempotencyObserver, NoopObserver, TraceCarrier } from '../observability/idempotency-observer';
import type { Job, Worker } from 'bullmq';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { loadPeer } from '../utils/optional-peer';
import { drainAndClose } from './step-worker';
import { JobHandBack } from './hand-back';
import { WorkflowExecutor } from './workflow.executor';
import { WorkflowRegistry } from './workflow.registry';
import { WAKE_ON_SIGNAL_DELAY_MS, WorkflowQueues } from './workflow-queues';
import { WAKE_EARLY_MS } from './run-waits';
import { WorkflowStore } from './storage/workflow.store';
import { QueueSettings } from '../queues/queue-settings';

/** @internal The data of a workflow-run job. */
export interface WorkflowJobData {
  executionId: string;
  /** The trace context of whoever started the execution (W3C `traceparent`), linked from each run's span. */
  trace?: TraceCarrier;
}

/**
 * Runs workflow-run jobs: each replays the workflow function from the top through the executor. A run stopped by
 * a graceful shutdown is put back (delayed by 0) so another instance picks it up without counting a recovery.
 */
@Injectable()
export class WorkflowWorker {
  private readonly logger: Logger = new LibraryLogger('Workflows');
  @Optional() @Inject(IdempotencyObserver) private readonly observer: IdempotencyObserver = new NoopObserver();
  private readonly workers: Worker[] = [];
  private readonly handBack: JobHandBack;
  private running = 0;

  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly registry: WorkflowRegistry,
    private readonly queues: WorkflowQueues,
    private readonly executor: WorkflowExecutor,
    private readonly store: WorkflowStore,
    private readonly queueSettings: QueueSettings,
  ) {
    this.handBack = new JobHandBack(this.logger, options.workflows.pollIntervalMs);
  }

  /** Starts one BullMQ Worker per workflow queue. */
  start(): void {
    const o = this.options.workflows;
    const { Worker } = loadPeer('bullmq', 'workflows (@Workflow() classes)');
    for (const name of this.registry.workflowQueues()) {
      const worker = new Worker<WorkflowJobData, string>(name, (job, token) => this.process(job, token), {
        connection: this.queues.connection(),
        prefix: this.queues.prefixOf(name),
        ...this.queueSettings.for(name, o.workflowConcurrency).worker,
        lockDuration: o.lockDurationMs,
        stalledInterval: o.stalledIntervalMs,
        // Interrupted runs are counted in Postgres (recovery_attempts); BullMQ just hands them back.
        maxStalledCount: o.maxRecoveryAttempts + 1,
      });
      worker.on('error', (err) => this.logger.warn(`workflow worker "${name}": ${err.message}`));
      this.workers.push(worker);
    }
  }

  /** True while every workflow worker of this instance is running (health checks). */
  workersAlive(): boolean {
    return this.workers.every((w) => w.isRunning());
  }

  /** Closes the workers once their runs have returned (call `WorkflowExecutor.abortAll()` first). */
  async close(): Promise<void> {
    const workers = this.workers.splice(0);
    await Promise.all(workers.map((w) => drainAndClose(w, () => this.running === 0, this.options.workflows.lockDurationMs)));
  }

  private async process(job: Job<WorkflowJobData, string>, token?: string): Promise<string> {
    // The job's name is its workflow's: one this instance does not know goes back, untouched, for one that does.
    if (!this.registry.find(job.name)) return this.handBack.send(job, token, `workflow "${job.name}"`);
    this.running++;
    try {
      // BullMQ keeps a job's lock under `<job key>:lock`, holding the token it gave this worker for it.
      const lock = token && job.id ? { key: `${job.queueQualifiedName}:${job.id}:lock`, token } : undefined;
      const outcome = await this.observer.workflowRun(job.data.executionId, job.name, job.data.trace, () => this.executor.execute(job.data.executionId, lock));
      if (outcome === 'finished') return outcome;
      if (outcome === 'released') {
        await job.moveToDelayed(Date.now(), token);
      } else {
        // Suspended (sleep, recv, a child): the job waits in BullMQ's delayed set, holding no worker slot.
        const until = outcome.suspendedUntil === Infinity ? Date.now() + WAKE_ON_SIGNAL_DELAY_MS : outcome.suspendedUntil - WAKE_EARLY_MS;
        await job.moveToDelayed(Math.max(until, Date.now()), token);
        // A message or a child that arrived while the job was still active left the wake to this run: promote it.
        if (await this.store.wakeRequested(job.data.executionId).catch(() => true)) await job.promote().catch(() => undefined);
      }
      throw new (loadPeer('bullmq', 'workflows (@Workflow() classes)').DelayedError)();
    } finally {
      this.running--;
    }
  }
}
