import type { StoredError } from '../../errors/workflow-failed.error';
import { jsonCopy } from '../../storage/memory/memory-support';
import { RELEASED_WORKFLOW_STATUSES } from '../workflow.interfaces';
import type { ExecutionKind, ListWorkflowsOptions, StepCheckpoint, WorkflowExecution, WorkflowStatus } from '../workflow.interfaces';
import {
  BeginOutcome, CheckpointedExecution, EventRead, ExecutionActivity, NewExecution, RecordedStep, RunEnd, SentMessage, StepOutcome, SuspendOutcome, UnfinishedExecution, WaitKind, WorkflowStore, RegisteredWait,
} from './workflow.store';

type StoredExecution = WorkflowExecution & { inputHash: string; sequence: number; nextStepSeq: number; runEnd: RunEnd | null; wakeRequested: boolean; started?: boolean };

interface StoredMessage {
  seq: number;
  executionId: string;
  topic: string;
  message: unknown;
  idempotencyKey: string | null;
  consumedPosition: number | null;
  sentAt: Date;
}

/** What an execution suspended until a message or a child shows (Postgres stores 'infinity'). */
const FAR_AHEAD = new Date(8.64e15);

const UNFINISHED: readonly WorkflowStatus[] = ['pending', 'running'];
const FINAL: readonly WorkflowStatus[] = ['completed', 'failed', 'cancelled', 'timed_out'];

/**
 * The in-memory workflow store of `IdempotencyTestingModule`, with the Postgres store's rules: one live or completed
 * execution per workflow id (failed, cancelled and timed-out ones free it), each (execution, position) checkpointed
 * once, and every status change a compare-and-set on the current status. Values are stored as JSON copies, so a
 * test sees what Postgres would give back (`undefined` → null, a `Date` → its ISO string).
 */
export class MemoryWorkflowStore extends WorkflowStore {
  private readonly executions = new Map<string, StoredExecution>();
  private readonly checkpoints = new Map<string, Map<number, RecordedStep>>();
  private readonly waits = new Map<string, Map<number, RegisteredWait>>();
  private readonly messages: StoredMessage[] = [];
  private readonly events = new Map<string, Map<string, { value: unknown; updatedAt: Date }>>();
  private sequence = 0;
  private messageSeq = 0;
  private reconcilerLocked = false;

  insert(execution: NewExecution): Promise<{ inserted: boolean; execution: WorkflowExecution & { inputHash: string } }> {
    const holder = this.holder(execution.workflowId);
    if (holder) return Promise.resolve({ inserted: false, execution: view(holder) });
    const now = new Date();
    const stored: StoredExecution = {
      executionId: execution.executionId,
      workflowId: execution.workflowId,
      workflowName: execution.workflowName,
      kind: execution.kind ?? 'workflow',
      status: 'pending',
      input: jsonCopy(execution.input ?? null),
      inputHash: execution.inputHash,
      result: null,
      error: null,
      recoveryAttempts: 0,
      createdAt: now,
      updatedAt: now,
      completedAt: null,
      deadlineAt: execution.timeoutMs === undefined ? null : new Date(now.getTime() + execution.timeoutMs),
      sequence: this.sequence++,
      nextStepSeq: 0,
      runEnd: null,
      parentExecutionId: execution.parentExecutionId ?? null,
      suspendedUntil: null,
      wakeRequested: false,
    };
    this.executions.set(stored.executionId, stored);
    return Promise.resolve({ inserted: true, execution: view(stored) });
  }

  async begin(executionId: string, maxRecoveries: number): Promise<BeginOutcome> {
    const execution = this.executions.get(executionId);
    if (!execution || !UNFINISHED.includes(execution.status)) return { kind: 'skip', execution: await this.get(executionId) };
    if (execution.status === 'running') execution.recoveryAttempts++;
    const firstRun = !execution.started;
    execution.started = true;
    execution.status = 'running';
    execution.suspendedUntil = null;
    execution.wakeRequested = false;
    execution.updatedAt = new Date();
    if (execution.recoveryAttempts > maxRecoveries) {
      this.failExhausted(execution, maxRecoveries);
      return { kind: 'skip', execution: view(execution) };
    }
    const recorded = [...(this.checkpoints.get(executionId)?.values() ?? [])].sort((a, b) => a.sequence - b.sequence);
    return { kind: 'run', execution: view(execution), recorded: recorded.map(jsonCopyCheckpoint), waits: new Map(this.waits.get(executionId)), firstRun };
  }

  finish(
    executionId: string,
    status: 'completed' | 'failed' | 'timed_out',
    value: { result?: unknown; error?: StoredError; end?: RunEnd },
  ): Promise<boolean> {
    const execution = this.executions.get(executionId);
    if (!execution || !UNFINISHED.includes(execution.status)) return Promise.resolve(false);
    const now = new Date();
    Object.assign(execution, {
      status,
      result: value.result === undefined ? null : jsonCopy(value.result),
      error: value.error === undefined ? null : jsonCopy(value.error),
      updatedAt: now,
      completedAt: now,
      runEnd: value.end ? jsonCopy(value.end) : null,
    });
    return Promise.resolve(true);
  }

  recordRunEnd(executionId: string, end: RunEnd): Promise<void> {
    const execution = this.executions.get(executionId);
    if (execution?.status === 'cancelled') execution.runEnd = jsonCopy(end);
    return Promise.resolve();
  }

  markRunning(executionId: string): Promise<boolean> {
    const execution = this.executions.get(executionId);
    if (!execution || !UNFINISHED.includes(execution.status)) return Promise.resolve(false);
    Object.assign(execution, { status: 'running', updatedAt: new Date() });
    return Promise.resolve(true);
  }

  release(executionId: string): Promise<void> {
    const execution = this.executions.get(executionId);
    if (execution?.status === 'running') Object.assign(execution, { status: 'pending', updatedAt: new Date() });
    return Promise.resolve();
  }

  stepState(executionId: string, position: number): Promise<{ status: WorkflowStatus | null; checkpoint: StepCheckpoint | null }> {
    const execution = this.executions.get(executionId);
    if (!execution) return Promise.resolve({ status: null, checkpoint: null });
    const checkpoint = this.checkpoints.get(executionId)?.get(position);
    return Promise.resolve({ status: execution.status, checkpoint: checkpoint && isCheckpoint(checkpoint) ? jsonCopyCheckpoint(checkpoint) : null });
  }

  checkpoint(
    executionId: string,
    position: number,
    name: string,
    outcome: StepOutcome,
    attempts: number,
    argsHash: string | null,
  ): Promise<{ written: boolean; checkpoint: StepCheckpoint; execution: CheckpointedExecution }> {
    const execution = this.executions.get(executionId);
    if (!execution) {
      return Promise.reject(new Error(`checkpoint of step "${name}" (#${position}): execution ${executionId} does not exist`));
    }
    const seen = { status: execution.status, recoveryAttempts: execution.recoveryAttempts };
    let steps = this.checkpoints.get(executionId);
    if (!steps) {
      steps = new Map<number, RecordedStep>();
      this.checkpoints.set(executionId, steps);
    }
    const existing = steps.get(position);
    if (existing && isCheckpoint(existing)) return Promise.resolve({ written: false, checkpoint: jsonCopyCheckpoint(existing), execution: seen });
    const checkpoint: StepCheckpoint = {
      position,
      name,
      status: outcome.status,
      result: outcome.status === 'completed' ? jsonCopy(outcome.result ?? null) : null,
      error: outcome.status === 'failed' ? jsonCopy(outcome.error) : null,
      attempts,
      completedAt: new Date(),
      // A 'retrying' row (resume) is overwritten in place and keeps its number, as in Postgres.
      sequence: existing ? existing.sequence : execution.nextStepSeq++,
      argsHash,
    };
    steps.set(position, checkpoint);
    return Promise.resolve({ written: true, checkpoint: jsonCopyCheckpoint(checkpoint), execution: seen });
  }

  async startTaskAttempt(executionId: string, position: number): Promise<{ status: WorkflowStatus | null; checkpoint: StepCheckpoint | null }> {
    await this.markRunning(executionId);
    return this.stepState(executionId, position);
  }

  async checkpointTask(
    executionId: string,
    position: number,
    name: string,
    outcome: StepOutcome,
    attempts: number,
    argsHash: string | null,
    endStatus: 'completed' | 'failed' | 'timed_out',
  ): Promise<{ written: boolean; checkpoint: StepCheckpoint; execution: CheckpointedExecution }> {
    const written = await this.checkpoint(executionId, position, name, outcome, attempts, argsHash);
    if (written.written) {
      await this.finish(executionId, endStatus, outcome.status === 'completed' ? { result: outcome.result ?? null } : { error: outcome.error });
    }
    return written;
  }

  recordedBetween(executionId: string, from: number, to: number): Promise<RecordedStep[]> {
    const rows = [...(this.checkpoints.get(executionId)?.values() ?? [])].filter((r) => r.sequence >= from && r.sequence < to);
    return Promise.resolve(rows.sort((a, b) => a.sequence - b.sequence).map(jsonCopyCheckpoint));
  }

  get(executionId: string): Promise<WorkflowExecution | null> {
    const execution = this.executions.get(executionId);
    return Promise.resolve(execution ? view(execution) : null);
  }

  latest(workflowId: string): Promise<WorkflowExecution | null> {
    const newest = this.holder(workflowId) ?? this.newestFirst().find((e) => e.workflowId === workflowId);
    return Promise.resolve(newest ? view(newest) : null);
  }

  cancel(workflowId: string, kind?: ExecutionKind): Promise<WorkflowExecution | null> {
    const execution = this.newestFirst().find((e) => e.workflowId === workflowId && UNFINISHED.includes(e.status) && (kind === undefined || e.kind === kind));
    if (!execution) return Promise.resolve(null);
    const now = new Date();
    // The execution and its unfinished child workflows at any depth, as the Postgres store's one statement does.
    const tree = new Set([execution.executionId]);
    for (let grew = true; grew; ) {
      grew = false;
      for (const e of this.executions.values()) {
        if (e.parentExecutionId !== null && tree.has(e.parentExecutionId) && !tree.has(e.executionId)) grew = tree.add(e.executionId) !== undefined;
      }
    }
    for (const id of tree) {
      const e = this.executions.get(id);
      if (e && UNFINISHED.includes(e.status)) Object.assign(e, { status: 'cancelled', updatedAt: now, completedAt: now, suspendedUntil: null });
    }
    return Promise.resolve(view(execution));
  }

  resume(executionId: string): Promise<{ execution: WorkflowExecution; retried: StepCheckpoint[] } | null> {
    const execution = this.executions.get(executionId);
    if (!execution || (execution.status !== 'failed' && execution.status !== 'cancelled')) return Promise.resolve(null);
    const holder = this.holder(execution.workflowId);
    if (holder) {
      // What Postgres's partial unique index answers: the caller turns it into WorkflowExistsError.
      const violation = new Error(`workflow id "${execution.workflowId}" is held by execution ${holder.executionId}`);
      return Promise.reject(Object.assign(violation, { code: '23505' }));
    }
    const retried = this.markRetrying(execution);
    const now = new Date();
    Object.assign(execution, {
      status: 'pending',
      runEnd: null,
      error: null,
      result: null,
      recoveryAttempts: 0,
      completedAt: null,
      updatedAt: now,
      deadlineAt: execution.deadlineAt && new Date(now.getTime() + execution.deadlineAt.getTime() - execution.createdAt.getTime()),
    });
    return Promise.resolve({ execution: view(execution), retried });
  }

  list(options: ListWorkflowsOptions & { workflow?: string }): Promise<WorkflowExecution[]> {
    const statuses = options.status === undefined ? undefined : Array.isArray(options.status) ? options.status : [options.status];
    const limit = Math.min(Math.max(options.limit ?? 100, 1), 1000);
    const found = this.newestFirst().filter(
      (e) => (statuses === undefined || statuses.includes(e.status)) && (options.workflow === undefined || e.workflowName === options.workflow)
        && (options.parentExecutionId === undefined || e.parentExecutionId === options.parentExecutionId)
        && e.kind === (options.kind ?? 'workflow'),
    );
    return Promise.resolve(found.slice(0, limit).map(view));
  }

  steps(executionId: string): Promise<StepCheckpoint[]> {
    const steps = [...(this.checkpoints.get(executionId)?.values() ?? [])].filter(isCheckpoint);
    return Promise.resolve(steps.sort((a, b) => a.position - b.position).map(jsonCopyCheckpoint));
  }

  unfinished(idleMs: number, limit: number, after?: UnfinishedExecution): Promise<UnfinishedExecution[]> {
    const idleSince = Date.now() - idleMs;
    const cursorOf = (e: StoredExecution) => String(e.updatedAt.getTime()).padStart(16, '0');
    const found = [...this.executions.values()]
      .filter((e) => UNFINISHED.includes(e.status) && e.updatedAt.getTime() < idleSince)
      .filter((e) => !after || cursorOf(e) > after.cursor || (cursorOf(e) === after.cursor && e.executionId > after.executionId))
      .sort((a, b) => cursorOf(a).localeCompare(cursorOf(b)) || a.executionId.localeCompare(b.executionId))
      .slice(0, limit);
    return Promise.resolve(found.map((e) => ({
      executionId: e.executionId,
      workflowName: e.workflowName,
      status: e.status,
      cursor: cursorOf(e),
      suspendedUntil: e.suspendedUntil === null ? null : e.suspendedUntil === FAR_AHEAD ? Infinity : e.suspendedUntil.getTime(),
      wakeRequested: e.wakeRequested,
    })));
  }

  countRecovery(executionId: string, maxRecoveries: number): Promise<boolean> {
    const execution = this.executions.get(executionId);
    if (!execution || !UNFINISHED.includes(execution.status)) return Promise.resolve(false);
    execution.recoveryAttempts++;
    execution.updatedAt = new Date();
    // Back to pending, as in Postgres: the run this recovery re-enqueues must not count the same incident again.
    execution.status = 'pending';
    if (execution.recoveryAttempts <= maxRecoveries) return Promise.resolve(true);
    this.failExhausted(execution, maxRecoveries);
    return Promise.resolve(false);
  }

  timeOutExpired(): Promise<string[]> {
    const now = new Date();
    const expired = [...this.executions.values()].filter((e) => UNFINISHED.includes(e.status) && e.deadlineAt !== null && e.deadlineAt < now);
    for (const execution of expired) {
      Object.assign(execution, {
        status: 'timed_out',
        updatedAt: now,
        completedAt: now,
        error: { name: 'WorkflowTimeoutError', message: 'the workflow did not finish before its timeout' },
      });
    }
    return Promise.resolve(expired.map((e) => e.executionId));
  }

  deleteFinished(executionId: string): Promise<void> {
    const execution = this.executions.get(executionId);
    if (execution && FINAL.includes(execution.status)) {
      this.forget(executionId);
    }
    return Promise.resolve();
  }

  async withReconcilerLock(work: () => Promise<void>): Promise<boolean> {
    // one process: no holder can die and keep it, so there is no lease
    if (this.reconcilerLocked) return false;
    this.reconcilerLocked = true;
    try {
      await work();
      return true;
    } finally {
      this.reconcilerLocked = false;
    }
  }

  /**
   * Deletes the finished executions of one workflow (or of every workflow not named in `notIn`) that finished
   * `retentionMs` ago or more, as a cleanup pass does; returns their workflow ids.
   */
  prune(workflowName: string | { notIn: string[] }, retentionMs: number): string[] {
    const before = Date.now() - retentionMs;
    const removed: string[] = [];
    for (const execution of [...this.executions.values()]) {
      const matches = typeof workflowName === 'string' ? execution.workflowName === workflowName : !workflowName.notIn.includes(execution.workflowName);
      if (matches && FINAL.includes(execution.status) && execution.completedAt !== null && execution.completedAt.getTime() <= before) {
        this.forget(execution.executionId);
        removed.push(execution.workflowId);
      }
    }
    return removed;
  }

  /** Forgets every execution (between tests). */
  clear(): void {
    this.executions.clear();
    this.checkpoints.clear();
    this.waits.clear();
    this.messages.length = 0;
    this.events.clear();
  }

  registerWait(executionId: string, position: number, kind: WaitKind, argsHash: string | null, afterMs: number | null): Promise<RegisteredWait> {
    if (!this.executions.has(executionId)) {
      return Promise.reject(new Error(`wait #${position} of execution ${executionId} could not be registered (the execution no longer exists)`));
    }
    let waits = this.waits.get(executionId);
    if (!waits) {
      waits = new Map();
      this.waits.set(executionId, waits);
    }
    if (!waits.has(position)) waits.set(position, { kind, argsHash, wakeAt: afterMs === null ? Infinity : Date.now() + Math.round(afterMs) });
    return Promise.resolve({ ...(waits.get(position) as RegisteredWait) });
  }

  async receive(executionId: string, position: number, topic: string, argsHash: string | null): Promise<StepCheckpoint | null> {
    const existing = (await this.stepState(executionId, position)).checkpoint;
    if (existing) return existing;
    const next = this.messages.find((m) => m.executionId === executionId && m.topic === topic && m.consumedPosition === null);
    if (!next) return null;
    next.consumedPosition = position;
    return (await this.checkpoint(executionId, position, '@recv', { status: 'completed', result: { message: next.message } }, 1, argsHash)).checkpoint;
  }

  send(workflowId: string, topic: string, message: unknown, idempotencyKey: string | null): Promise<SentMessage | null> {
    const execution = this.holder(workflowId) ?? this.newestFirst().find((e) => e.workflowId === workflowId);
    if (!execution) return Promise.resolve(null);
    const duplicate = idempotencyKey !== null
      && this.messages.some((m) => m.executionId === execution.executionId && m.idempotencyKey === idempotencyKey);
    if (!UNFINISHED.includes(execution.status)) return Promise.resolve({ execution: view(execution), stored: false, duplicate });
    if (!duplicate) {
      this.messages.push({ seq: this.messageSeq++, executionId: execution.executionId, topic, message: jsonCopy(message ?? null), idempotencyKey, consumedPosition: null, sentAt: new Date() });
    }
    execution.wakeRequested = true;
    return Promise.resolve({ execution: view(execution), stored: !duplicate, duplicate });
  }

  suspend(executionId: string, untilMs: number): Promise<SuspendOutcome> {
    const execution = this.executions.get(executionId);
    if (execution?.status !== 'running') return Promise.resolve('stopped');
    if (execution.wakeRequested) return Promise.resolve('woken');
    Object.assign(execution, { status: 'pending', updatedAt: new Date(), suspendedUntil: untilMs === Infinity ? FAR_AHEAD : new Date(untilMs) });
    return Promise.resolve('suspended');
  }

  wakeRequested(executionId: string): Promise<boolean> {
    return Promise.resolve(this.executions.get(executionId)?.wakeRequested ?? false);
  }

  requestWake(executionId: string): Promise<WorkflowExecution | null> {
    const execution = this.executions.get(executionId);
    if (!execution || !UNFINISHED.includes(execution.status)) return Promise.resolve(null);
    execution.wakeRequested = true;
    return Promise.resolve(view(execution));
  }

  setEvent(executionId: string, key: string, value: unknown): Promise<void> {
    let events = this.events.get(executionId);
    if (!events) {
      events = new Map();
      this.events.set(executionId, events);
    }
    events.set(key, { value: jsonCopy(value ?? null), updatedAt: new Date() });
    return Promise.resolve();
  }

  getEvent(workflowId: string, key: string): Promise<EventRead | null> {
    const execution = this.holder(workflowId) ?? this.newestFirst().find((e) => e.workflowId === workflowId);
    if (!execution) return Promise.resolve(null);
    const events = this.events.get(execution.executionId);
    const found = events?.has(key) ?? false;
    return Promise.resolve({ execution: view(execution), found, value: found ? jsonCopy(events?.get(key)?.value) : null });
  }

  activity(executionId: string): Promise<ExecutionActivity> {
    const events = [...(this.events.get(executionId) ?? new Map<string, { value: unknown; updatedAt: Date }>())]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([key, e]) => ({ key, value: jsonCopy(e.value), updatedAt: e.updatedAt }));
    const messages = this.messages.filter((m) => m.executionId === executionId).map((m) => ({
      seq: m.seq, topic: m.topic, message: jsonCopy(m.message), status: m.consumedPosition === null ? 'pending' as const : 'delivered' as const,
      receivedAt: m.consumedPosition, sentAt: m.sentAt,
    }));
    const checkpoints = this.checkpoints.get(executionId);
    const waits = [...(this.waits.get(executionId) ?? new Map<number, RegisteredWait>())].sort(([a], [b]) => a - b).map(([position, w]) => ({
      position, kind: w.kind, wakeAt: w.wakeAt === Infinity ? null : new Date(w.wakeAt), fired: checkpoints?.has(position) ?? false,
    }));
    return Promise.resolve({ events, messages, waits });
  }

  /** Deletes an execution with what hangs off it (checkpoints, waits, messages, events), as the foreign keys cascade. */
  private forget(executionId: string): void {
    this.executions.delete(executionId);
    this.checkpoints.delete(executionId);
    this.waits.delete(executionId);
    this.events.delete(executionId);
    for (let i = this.messages.length - 1; i >= 0; i--) if (this.messages[i].executionId === executionId) this.messages.splice(i, 1);
  }

  /** The execution that holds a workflow id: the one that is live or completed (there is at most one). */
  private holder(workflowId: string): StoredExecution | undefined {
    return [...this.executions.values()].find((e) => e.workflowId === workflowId && !RELEASED_WORKFLOW_STATUSES.includes(e.status));
  }

  /**
   * Marks 'retrying' the failures the last run did not handle, as the Postgres store's resume does: those whose errors
   * ended it and those it never received; without a record of the run's end, the last recorded failure.
   */
  private markRetrying(execution: StoredExecution): StepCheckpoint[] {
    const rows = [...(this.checkpoints.get(execution.executionId)?.values() ?? [])];
    const lastSeq = Math.max(-1, ...rows.map((r) => r.sequence));
    const end = execution.runEnd;
    const retried: StepCheckpoint[] = [];
    for (const row of rows) {
      if (row.status !== 'failed') continue;
      const rerun = end ? end.endedBy.includes(row.position) || row.sequence > end.deliveredThrough : row.sequence === lastSeq;
      if (!rerun) continue;
      retried.push(jsonCopyCheckpoint(row));
      Object.assign(row, { status: 'retrying' });
    }
    return retried;
  }

  private newestFirst(): StoredExecution[] {
    return [...this.executions.values()].sort((a, b) => b.sequence - a.sequence);
  }

  private failExhausted(execution: StoredExecution, maxRecoveries: number): void {
    const now = new Date();
    Object.assign(execution, {
      status: 'failed',
      updatedAt: now,
      completedAt: now,
      error: {
        name: 'RecoveryAttemptsExhaustedError',
        code: 'RECOVERY_ATTEMPTS_EXHAUSTED',
        message: `the execution was interrupted or re-enqueued more than ${maxRecoveries} times (workflows.maxRecoveryAttempts); resume it once the cause is fixed`,
      },
    });
  }
}

/** A copy the caller may change without touching the store (dates stay dates). */
function view(execution: StoredExecution): WorkflowExecution & { inputHash: string } {
  const rest: WorkflowExecution & { inputHash: string; sequence?: number; nextStepSeq?: number; runEnd?: RunEnd | null; wakeRequested?: boolean; started?: boolean } = { ...execution };
  delete rest.sequence;
  delete rest.started;
  delete rest.nextStepSeq;
  delete rest.runEnd;
  delete rest.wakeRequested;
  return { ...rest, input: jsonCopy(rest.input), result: jsonCopy(rest.result), error: rest.error && jsonCopy(rest.error) };
}

function jsonCopyCheckpoint<T extends RecordedStep>(checkpoint: T): T {
  return { ...checkpoint, result: jsonCopy(checkpoint.result), error: checkpoint.error && jsonCopy(checkpoint.error) };
}

function isCheckpoint(row: RecordedStep): row is StepCheckpoint {
  return row.status !== 'retrying';
}
