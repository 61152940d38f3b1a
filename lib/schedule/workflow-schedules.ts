import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { IdempotencyConfigError } from '../errors/idempotency-config.error';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { WorkflowStore } from '../workflow/storage/workflow.store';
import { WorkflowClient } from '../workflow/workflow.client';
import { WorkflowMetadataAccessor } from '../workflow/workflow-metadata.accessor';
import { WorkflowRegistry } from '../workflow/workflow.registry';
import { ScheduleMetadataAccessor } from './schedule-metadata.accessor';
import { scheduleProblems, ScheduleRegistrar } from './schedule-registrar';
import type { ScheduledMetadata } from './scheduled.decorator';
import type { ScheduledInput } from './schedule.interfaces';

/**
 * The `'workflow'` kind of schedule: finds `@Scheduled()` workflow classes at module init (refusing a bad cron, time
 * zone or option, or a class that is not a `@Workflow()`), declares them at bootstrap under the workflow's name, and
 * starts each occurrence as the workflow with id `<name>@<time ISO>` and input `{ scheduledAt }`.
 */
@Injectable()
export class WorkflowSchedules implements OnModuleInit {
  private readonly found: { type: abstract new (...args: never[]) => unknown; scheduled: ScheduledMetadata }[] = [];

  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly discovery: DiscoveryService,
    private readonly metadata: ScheduleMetadataAccessor,
    private readonly workflowMetadata: WorkflowMetadataAccessor,
    private readonly registry: WorkflowRegistry,
    private readonly registrar: ScheduleRegistrar,
    private readonly client: WorkflowClient,
    private readonly store: WorkflowStore,
  ) {}

  onModuleInit(): void {
    const problems: string[] = [];
    const seen = new Set<unknown>();
    for (const wrapper of this.discovery.getProviders()) {
      const type = wrapper.metatype as (abstract new (...args: never[]) => unknown) | undefined;
      const scheduled = type ? this.metadata.scheduled(type) : undefined;
      if (!type || !scheduled || seen.has(type)) continue;
      seen.add(type);
      const where = `@Scheduled() on ${type.name}`;
      if (!this.workflowMetadata.workflowOptions(type)) problems.push(`${where}: only a @Workflow() class or a @Task() method can be scheduled`);
      // The testing module loads no bullmq, whose cron parser checks the expression: it checks the rest.
      const found = scheduleProblems(scheduled.cron, scheduled.options, !this.registrar.inert);
      problems.push(...found.map((p) => `${where}: ${p}`));
      this.found.push({ type, scheduled });
    }
    if (problems.length > 0) throw new IdempotencyConfigError(problems, 'Invalid @Scheduled() schedules');
  }

  /** Declares the `@Scheduled()` workflows (their names are known once the workflow explorer has run) and the workflow kind. */
  declareAll(): void {
    if (this.registry.isEmpty) return;
    this.registrar.addKind('workflow', (target, id, at) => this.startOccurrence(target, id, at));
    for (const { type, scheduled } of this.found) {
      const name = this.registry.get(type).name;
      this.registrar.declare({
        name,
        kind: 'workflow',
        target: name,
        cron: scheduled.cron,
        ...(scheduled.options.timezone === undefined ? {} : { timezone: scheduled.options.timezone }),
        catchUp: scheduled.options.catchUp ?? 'latest',
        source: 'decorator',
      });
    }
  }

  /** Starts one occurrence, unless an execution of its id exists (even a failed one: an occurrence runs once). */
  private async startOccurrence(workflow: string, workflowId: string, scheduledAt: Date): Promise<void> {
    if (await this.store.latest(workflowId)) return;
    const input: ScheduledInput = { scheduledAt: scheduledAt.toISOString() };
    await this.client.start(workflow, input as never, { workflowId });
  }

  /** True when workflows run in this module at all (options read so the kind stays off without Redis). */
  get enabled(): boolean {
    return this.options.redis !== false || this.options.workflows.inline === true;
  }
}
