import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { LibraryLogger } from '../observability/library-logger';
import type { Job, Worker } from 'bullmq';
import { IdempotencyConfigError } from '../errors/idempotency-config.error';
import { ScheduleInvalidError } from '../errors/schedule-invalid.error';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { IdempotencyConnections } from '../storage/idempotency-connections';
import { loadPeer } from '../utils/optional-peer';
import { drainAndClose } from '../workflow/step-worker';
import { WorkflowQueues } from '../workflow/workflow-queues';
import { missedToRun, scheduleOptionProblems } from './catch-up';
import { cronProblem, nextOccurrence, occurrencesBetween, timezoneProblem } from './cron';
import { CATCH_UP_ALL_LIMIT, occurrenceId, SCHEDULES_QUEUE } from './schedule.constants';
import type { OccurrenceStarter, ScheduleDefinition, ScheduleInfo } from './schedule.interfaces';
import { PostgresScheduleStore, ScheduleRow } from './schedule.store';

/** The data of a schedule's occurrence job: only the name; the definition is read from Postgres. */
interface OccurrenceJobData {
  name: string;
}

/**
 * Every problem of a schedule's cron, time zone and catch-up, as `option: message`. The cron expression is parsed by
 * BullMQ's cron parser unless `parseCron` is false (the testing module loads no bullmq).
 */
export function scheduleProblems(cron: unknown, options: { timezone?: unknown; catchUp?: unknown } | undefined, parseCron = true): string[] {
  const problems = scheduleOptionProblems(options);
  const tz = timezoneProblem(options?.timezone);
  if (tz) problems.push(`timezone: ${tz}`);
  const c = parseCron ? cronProblem(cron, tz ? undefined : (options?.timezone as string | undefined)) : undefined;
  if (c) problems.push(`cron: ${c}`);
  return problems;
}

/**
 * Runs schedules of any kind on BullMQ job schedulers (one per schedule, in the `idempotency-schedules` queue).
 * A kind (`'workflow'`, later `'task'`) registers how to start one occurrence with `addKind`; schedules are declared
 * (decorators, at bootstrap) or added at runtime (`schedule`). Postgres holds each schedule with the newest occurrence
 * handled, so any instance can run any occurrence, and missed occurrences are found after downtime: at boot, and
 * whenever an occurrence job finds a gap before its own time. Each occurrence starts with id `<name>@<time ISO>`.
 */
@Injectable()
export class ScheduleRegistrar {
  private readonly logger: Logger = new LibraryLogger('Workflows');
  private readonly kinds = new Map<string, OccurrenceStarter>();
  private readonly declared = new Map<string, ScheduleDefinition>();
  private worker?: Worker;
  private running = 0;
  private storeInstance?: PostgresScheduleStore;

  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly queues: WorkflowQueues,
    // Absent in IdempotencyTestingModule, where schedules are not run (see `inert`).
    @Optional() private readonly connections?: IdempotencyConnections,
  ) {}

  /** IdempotencyTestingModule runs no schedules: there is no BullMQ and no time passes on its own in a unit test. */
  get inert(): boolean {
    return this.options.workflows.inline === true || !this.connections;
  }

  /** Registers how to start an occurrence of schedules of a kind (e.g. `'workflow'`: start the workflow `target`). */
  addKind(kind: string, starter: OccurrenceStarter): void {
    this.kinds.set(kind, starter);
  }

  /** Declares a schedule from a decorator; call before bootstrap ends (kinds do it in their onApplicationBootstrap). */
  declare(definition: ScheduleDefinition): void {
    this.declared.set(definition.name, definition);
  }

  /**
   * Saves every declared schedule and restores those added at runtime, runs what they missed (their `catchUp`),
   * upserts their BullMQ job schedulers, and starts the worker that runs occurrences (`workflows.workers`).
   */
  async start(): Promise<void> {
    if (this.inert) {
      if (this.declared.size > 0) this.logger.log(`IdempotencyTestingModule does not run schedules (${[...this.declared.keys()].join(', ')}); start an occurrence yourself`);
      return;
    }
    if (this.declared.size === 0 && this.kinds.size === 0) return;
    await this.queues.init();
    const rows: ScheduleRow[] = [];
    for (const definition of this.declared.values()) rows.push(await this.store.save(definition));
    const declaredNames = new Set(this.declared.keys());
    for (const row of await this.store.runtime()) if (!declaredNames.has(row.name)) rows.push(row);
    if (rows.length > 0) this.assertJobSchedulers(rows.map((r) => r.name));
    const workers = this.options.workflows.workers;
    for (const row of rows) {
      // The scheduler's first job runs the first occurrence after now; every occurrence before it is the catch-up's.
      const first = await this.upsertScheduler(row);
      if (workers && this.kinds.has(row.kind)) await this.catchUpAtBoot(row, first - 1);
    }
    // Runs occurrences of every schedule, those added at runtime later (here or elsewhere) included.
    if (workers && this.kinds.size > 0) this.startWorker();
  }

  /** Adds or replaces a schedule at runtime; it catches up on nothing before now. Throws ScheduleInvalidError. */
  async schedule(definition: ScheduleDefinition): Promise<ScheduleInfo> {
    const options = { timezone: definition.timezone, catchUp: definition.catchUp };
    const problems = scheduleProblems(definition.cron, options, !this.inert);
    if (!definition.name) problems.push('name: expected a non-empty schedule name');
    if (problems.length > 0) throw new ScheduleInvalidError(definition.name, problems);
    if (this.inert) {
      this.logger.log(`IdempotencyTestingModule does not run schedules; schedule "${definition.name}" is not stored`);
      return this.info(definition, null);
    }
    await this.queues.init();
    this.assertJobSchedulers([definition.name]);
    await this.store.save(definition);
    return this.info(definition, await this.upsertScheduler(definition));
  }

  /** Removes a schedule (its row and its BullMQ job scheduler); false when there was none. A decorator's comes back at the next boot. */
  async unschedule(name: string): Promise<boolean> {
    if (this.inert) return false;
    await this.queues.init();
    const removed = await this.store.remove(name);
    const scheduler = await this.queues.queue(SCHEDULES_QUEUE).removeJobScheduler(name).catch(() => false);
    return removed || scheduler;
  }

  /** A stored schedule with its next occurrence; undefined when there is none of that name (or in the testing module). */
  async get(name: string): Promise<ScheduleInfo | undefined> {
    if (this.inert) return undefined;
    const row = await this.store.get(name);
    return row ? this.info(row, nextOccurrence(row.cron, row.timezone, Date.now())) : undefined;
  }

  /** A schedule's settings and its next occurrence (`next`, null when unknown). */
  private info(definition: Pick<ScheduleDefinition, 'name' | 'cron' | 'timezone' | 'catchUp'>, next: number | null): ScheduleInfo {
    return {
      name: definition.name,
      cron: definition.cron,
      ...(definition.timezone === undefined ? {} : { timezone: definition.timezone }),
      catchUp: definition.catchUp,
      nextAt: next === null ? null : new Date(next).toISOString(),
      nextOccurrenceId: next === null ? null : occurrenceId(definition.name, next),
    };
  }

  /** Closes the occurrence worker once the occurrences it runs have been started. */
  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    if (worker) await drainAndClose(worker, () => this.running === 0, this.options.workflows.lockDurationMs);
  }

  /** BullMQ gained job schedulers (`Queue.upsertJobScheduler`) in 5.16; the library accepts 5.14 for the rest. */
  private assertJobSchedulers(names: string[]): void {
    if (typeof this.queues.queue(SCHEDULES_QUEUE).upsertJobScheduler === 'function') return;
    throw new IdempotencyConfigError([
      `schedules (${names.join(', ')}): the installed bullmq has no job schedulers (Queue.upsertJobScheduler, BullMQ 5.16 or later); upgrade bullmq`,
    ]);
  }

  private get store(): PostgresScheduleStore {
    const connections = this.connections as IdempotencyConnections;
    return (this.storeInstance ??= new PostgresScheduleStore(connections.pool, connections.schema));
  }

  /** Creates or updates the schedule's BullMQ job scheduler (replacing a job left from before); returns its next occurrence. */
  private async upsertScheduler(d: Pick<ScheduleDefinition, 'name' | 'cron' | 'timezone'>): Promise<number> {
    const data: OccurrenceJobData = { name: d.name };
    const job = await this.queues.queue(SCHEDULES_QUEUE).upsertJobScheduler(
      d.name,
      { pattern: d.cron, ...(d.timezone ? { tz: d.timezone } : {}) },
      // A start that fails (Postgres down) is retried; the occurrence's id makes a retry start nothing twice.
      { name: d.name, data, opts: { attempts: 5, backoff: { type: 'exponential', delay: 500 }, removeOnComplete: true, removeOnFail: 100 } },
    );
    return (job && occurrenceTime(job)) ?? nextOccurrence(d.cron, d.timezone, Date.now());
  }

  private startWorker(): void {
    const o = this.options.workflows;
    const { Worker } = loadPeer('bullmq', 'schedules (@Scheduled())');
    this.worker = new Worker<OccurrenceJobData>(SCHEDULES_QUEUE, (job) => this.process(job), {
      connection: this.queues.connection(),
      prefix: this.queues.prefixOf(SCHEDULES_QUEUE),
      concurrency: 5,
      lockDuration: o.lockDurationMs,
      stalledInterval: o.stalledIntervalMs,
    });
    this.worker.on('error', (err) => this.logger.warn(`schedule worker: ${err.message}`));
  }

  /** Runs one occurrence job: the missed occurrences before it (its catchUp), then its own. */
  private async process(job: Job<OccurrenceJobData>): Promise<void> {
    this.running++;
    try {
      const at = occurrenceTime(job);
      const row = await this.store.get(job.data.name);
      if (!row) {
        // Removed meanwhile (unschedule on another instance): stop its scheduler too.
        await this.queues.queue(SCHEDULES_QUEUE).removeJobScheduler(job.data.name).catch(() => false);
        return;
      }
      if (at === undefined) throw new Error(`job ${job.id} of schedule "${row.name}" carries no occurrence time`);
      const missed = occurrencesBetween(row.cron, row.timezone, row.lastOccurrenceMs, at - 1, CATCH_UP_ALL_LIMIT);
      const run = missedToRun(row.catchUp, missed.newest);
      // Its own occurrence always starts, even behind the mark: a job that fires is never a missed occurrence.
      for (const time of [...run, at]) await this.startOccurrence(row, time);
      await this.store.advance(row.name, at);
      // A gap while instances run (a late job made BullMQ skip ahead) is logged; the row keeps the catch-up at boot.
      if (missed.count > 0) this.logCatchUp(row, at - 1, missed.count, run.length);
    } finally {
      this.running--;
    }
  }

  /** At boot: the occurrences after the mark up to `upToMs` (before the scheduler's first job) were missed; run them per catchUp. */
  private async catchUpAtBoot(row: ScheduleRow, upToMs: number): Promise<void> {
    const missed = occurrencesBetween(row.cron, row.timezone, row.lastOccurrenceMs, upToMs, CATCH_UP_ALL_LIMIT);
    if (missed.count === 0) return;
    const run = missedToRun(row.catchUp, missed.newest);
    for (const time of run) await this.startOccurrence(row, time);
    await this.store.advance(row.name, missed.newest[missed.newest.length - 1]);
    await this.noteCatchUp(row, missed.newest[missed.newest.length - 1], missed.count, run.length);
  }

  private async noteCatchUp(row: ScheduleRow, throughMs: number, count: number, started: number): Promise<void> {
    await this.store.recordCatchUp(row.name, throughMs, count, started);
    this.logCatchUp(row, throughMs, count, started);
  }

  private logCatchUp(row: ScheduleRow, throughMs: number, count: number, started: number): void {
    const missed = count > CATCH_UP_ALL_LIMIT ? `more than ${CATCH_UP_ALL_LIMIT}` : String(count);
    this.logger.log(`schedule "${row.name}": ${missed} missed occurrence(s) through ${new Date(throughMs).toISOString()}; catchUp '${row.catchUp}' started ${started}`);
  }

  private async startOccurrence(row: ScheduleRow, time: number): Promise<void> {
    const starter = this.kinds.get(row.kind);
    if (!starter) throw new Error(`schedule "${row.name}" starts a ${row.kind}, which this instance cannot start`);
    await starter(row.target, occurrenceId(row.name, time), new Date(time));
  }
}

/** The scheduled time of an occurrence job: BullMQ names a scheduler's jobs `repeat:<scheduler id>:<millis>`. */
function occurrenceTime(job: Job): number | undefined {
  const match = /:(\d+)$/.exec(job.id ?? '');
  if (match) return Number(match[1]);
  const prev = (job.opts as { prevMillis?: number }).prevMillis;
  return typeof prev === 'number' ? prev : undefined;
}
