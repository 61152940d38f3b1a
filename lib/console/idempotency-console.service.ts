import { Injectable, Optional } from '@nestjs/common';
import { IdempotencyConfigError } from '../errors/idempotency-config.error';
import { IdempotencyCache } from '../storage/idempotency.cache';
import { IdempotencyConnections } from '../storage/idempotency-connections';
import { ExecutionActivity, WorkflowStore } from '../workflow/storage/workflow.store';
import { WorkflowClient } from '../workflow/workflow.client';
import type { StepCheckpoint, WorkflowExecution, WorkflowStatus } from '../workflow/workflow.interfaces';
import { KeyRecord, KeyRecords } from './key-records';

/** Filters of {@link IdempotencyConsole.listWorkflows}. */
export interface ConsoleWorkflowFilter {
  status?: WorkflowStatus;
  /** Workflow name. */
  workflow?: string;
  /** Executions created at or after this time. */
  since?: Date;
  /** Executions created before this time. */
  until?: Date;
  /** Default 100, at most 1000. */
  limit?: number;
}

/** One execution with its step checkpoints, and what it set, received and waits for (see {@link ExecutionActivity}). */
export interface ConsoleExecution extends ExecutionActivity {
  execution: WorkflowExecution;
  steps: StepCheckpoint[];
}

/**
 * What the console shows and does, as an injectable API: list and inspect workflow executions, cancel and resume
 * them; look up a key in a scope and release a stuck one. The web console and the CLI call the same operations.
 */
@Injectable()
export class IdempotencyConsole {
  private readonly records?: KeyRecords;

  constructor(
    private readonly store: WorkflowStore,
    private readonly client: WorkflowClient,
    @Optional() connections?: IdempotencyConnections,
    @Optional() private readonly cache?: IdempotencyCache,
  ) {
    this.records = connections && new KeyRecords(connections);
  }

  private get keys(): KeyRecords {
    if (!this.records) throw new IdempotencyConfigError(['IdempotencyConsole keys: need the Postgres store of IdempotencyModule (IdempotencyTestingModule has none)']);
    return this.records;
  }

  /** Executions, newest first, by status, workflow name and creation time. */
  async listWorkflows(filter: ConsoleWorkflowFilter = {}): Promise<WorkflowExecution[]> {
    const limit = Math.min(Math.max(filter.limit ?? 100, 1), 1000);
    const timed = filter.since !== undefined || filter.until !== undefined;
    const listed = await this.store.list({ status: filter.status, workflow: filter.workflow, limit: timed ? 1000 : limit });
    return listed
      .filter((e) => (filter.since === undefined || e.createdAt >= filter.since) && (filter.until === undefined || e.createdAt < filter.until))
      .slice(0, limit);
  }

  /** One execution, its steps, events, messages and durable waits; null when there is none with this id. */
  async showWorkflow(executionId: string): Promise<ConsoleExecution | null> {
    const execution = await this.store.get(executionId);
    if (!execution) return null;
    const [steps, activity] = await Promise.all([this.store.steps(executionId), this.store.activity(executionId)]);
    return { execution, steps, ...activity };
  }

  /** Cancels the live execution of a workflow id (see `WorkflowClient.cancel`); false when nothing was live. */
  cancelWorkflow(workflowId: string): Promise<boolean> {
    return this.client.cancel(workflowId);
  }

  /** Resumes the failed or cancelled execution of a workflow id (see `WorkflowClient.resume`); returns its execution id. */
  async resumeWorkflow(workflowId: string): Promise<string> {
    return (await this.client.resume(workflowId)).executionId;
  }

  /** The records of a key in a scope (scopes are prefixed by face: `http:<scope>`, `method:<scope>`), newest first. */
  showKey(scope: string, key: string): Promise<KeyRecord[]> {
    return this.keys.show(scope, key);
  }

  /** Releases a key stuck in progress; false when it had no record in progress. */
  async releaseKey(scope: string, key: string): Promise<boolean> {
    const released = await this.keys.release(scope, key);
    if (released) await this.cache?.forget(scope, key);
    return released;
  }
}
