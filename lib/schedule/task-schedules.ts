import { Injectable, OnModuleInit } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { IdempotencyConfigError } from '../errors/idempotency-config.error';
import { TaskMetadataAccessor } from '../task/task-metadata.accessor';
import { TaskClient } from '../task/task.client';
import { TaskRegistry } from '../task/task.registry';
import { WorkflowStore } from '../workflow/storage/workflow.store';
import { ScheduleMetadataAccessor } from './schedule-metadata.accessor';
import { scheduleProblems, ScheduleRegistrar } from './schedule-registrar';
import type { ScheduledMetadata } from './scheduled.decorator';
import type { ScheduledInput } from './schedule.interfaces';

type ProviderClass = abstract new (...args: never[]) => unknown;

/**
 * The `'task'` kind of schedule: finds `@Scheduled()` methods at module init (refusing a bad cron, time zone or
 * option, or a method that is not a `@Task()`), declares them at bootstrap under the task's name, and enqueues each
 * occurrence with task id `<name>@<time ISO>` and arguments `[{ scheduledAt }]`.
 */
@Injectable()
export class TaskSchedules implements OnModuleInit {
  private readonly found: { type: ProviderClass; method: string; scheduled: ScheduledMetadata }[] = [];

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly metadata: ScheduleMetadataAccessor,
    private readonly taskMetadata: TaskMetadataAccessor,
    private readonly tasks: TaskRegistry,
    private readonly registrar: ScheduleRegistrar,
    private readonly client: TaskClient,
    private readonly store: WorkflowStore,
  ) {}

  onModuleInit(): void {
    const problems: string[] = [];
    const seen = new Set<unknown>();
    for (const wrapper of this.discovery.getProviders()) {
      const type = wrapper.metatype as ProviderClass | undefined;
      if (typeof type !== 'function' || seen.has(type) || !type.prototype) continue;
      seen.add(type);
      const taskMethods = new Set(this.taskMetadata.tasks(type).map((t) => t.method));
      for (const method of methodsOf(type)) {
        const scheduled = this.metadata.scheduled((type.prototype as Record<string, unknown>)[method]);
        if (!scheduled) continue;
        const where = `@Scheduled() on ${type.name}.${method}`;
        if (!taskMethods.has(method)) problems.push(`${where}: only a @Task() method (or a @Workflow() class) can be scheduled`);
        problems.push(...scheduleProblems(scheduled.cron, scheduled.options, !this.registrar.inert).map((p) => `${where}: ${p}`));
        this.found.push({ type, method, scheduled });
      }
    }
    if (problems.length > 0) throw new IdempotencyConfigError(problems, 'Invalid @Scheduled() schedules');
  }

  /** Declares the `@Scheduled()` tasks (registered by the task explorer at module init) and the task kind. */
  declareAll(): void {
    if (this.found.length === 0) return;
    this.registrar.addKind('task', (target, id, at) => this.startOccurrence(target, id, at));
    for (const { type, method, scheduled } of this.found) {
      const name = this.tasks.get(type, method).name;
      this.registrar.declare({
        name,
        kind: 'task',
        target: name,
        cron: scheduled.cron,
        ...(scheduled.options.timezone === undefined ? {} : { timezone: scheduled.options.timezone }),
        catchUp: scheduled.options.catchUp ?? 'latest',
        source: 'decorator',
      });
    }
  }

  /** Enqueues one occurrence, unless an execution of its id exists (even a failed one: an occurrence runs once). */
  private async startOccurrence(taskName: string, taskId: string, scheduledAt: Date): Promise<void> {
    if (await this.store.latest(taskId)) return;
    const task = this.tasks.byName(taskName);
    if (!task) throw new Error(`schedule of task "${taskName}": the task is not registered in this instance`);
    const input: ScheduledInput = { scheduledAt: scheduledAt.toISOString() };
    await this.client.enqueue(task.type as new () => Record<string, (input: ScheduledInput) => unknown>, task.method, [input], { taskId });
  }
}

/** The own and inherited method names of a class's prototype chain. */
function methodsOf(type: ProviderClass): string[] {
  const names = new Set<string>();
  for (let proto = type.prototype as object | null; proto && proto !== Object.prototype; proto = Object.getPrototypeOf(proto) as object | null) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      if (name !== 'constructor' && typeof Object.getOwnPropertyDescriptor(proto, name)?.value === 'function') names.add(name);
    }
  }
  return [...names];
}
