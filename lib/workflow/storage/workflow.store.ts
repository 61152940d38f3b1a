import type { StoredError } from '../../errors/workflow-failed.error';
import type { ExecutionKind, ListWorkflowsOptions, StepCheckpoint, WorkflowExecution, WorkflowStatus } from '../workflow.interfaces';

/** A new execution to insert. */
export interface NewExecution {
  executionId: string;
  workflowId: string;
  workflowName: string;
  input: unknown;
  inputHash: string;
  timeoutMs?: number;
  /** The execution that started this one as a child workflow. */
  parentExecutionId?: string;
  /** Default 'workflow'. */
  kind?: ExecutionKind;
}

/** A durable wait at a journal position: `sleep` (wakes at its time) or `recv` (wakes on a message or its timeout). */
export type WaitKind = 'sleep' | 'recv';

/** A registered wait: its kind, the hash of its call's arguments (null: not recorded), its wake-up time (ms since the epoch; Infinity: none by time). */
export interface RegisteredWait {
  kind: WaitKind;
  argsHash: string | null;
  wakeAt: number;
}

/** What `send` did: the execution the message went to, and whether it was stored now (false: a duplicate idempotency key). */
export interface SentMessage {
  execution: WorkflowExecution;
  stored: boolean;
  /** The execution already holds a message with this idempotency key (sent before, maybe consumed since). */
  duplicate: boolean;
}

/** An execution's latest value for an event key (`found` false: not set yet). */
export interface EventRead {
  execution: WorkflowExecution;
  found: boolean;
  value: unknown;
}

/** How `suspend` ended: suspended, woken meanwhile (a message or a child arrived: run again), or no longer running. */
export type SuspendOutcome = 'suspended' | 'woken' | 'stopped';

/**
 * A row of an execution's step journal: a checkpoint, or (`retrying`) a failure that `resume()` is running again in
 * place, keeping its sequence number.
 */
export type RecordedStep = StepCheckpoint | (Omit<StepCheckpoint, 'status'> & { status: 'retrying' });

/** What the final run of a failed or cancelled execution received: what `resume()` needs to pick the failures to re-run. */
export interface RunEnd {
  /** The highest sequence number delivered to the workflow code (-1: none). */
  deliveredThrough: number;
  /** Positions of the failed steps whose errors ended the run. */
  endedBy: number[];
}

/**
 * What `begin` found: the execution to run with its journal (in sequence order) and its registered waits by position,
 * or an execution that must not run.
 */
export type BeginOutcome =
  | {
      kind: 'run';
      execution: WorkflowExecution;
      recorded: RecordedStep[];
      waits?: Map<number, RegisteredWait>;
      /** No run of this execution began before this one: no step job of it can exist yet (stores that cannot tell leave it out). */
      firstRun?: boolean;
    }
  | { kind: 'skip'; execution: WorkflowExecution | null };

/**
 * What a checkpoint write saw of its execution: its status and recovery count (when it took its sequence number, under
 * the execution's row lock). A run compares them with its own, instead of reading the execution before the next step.
 */
export interface CheckpointedExecution {
  status: WorkflowStatus;
  recoveryAttempts: number;
}

/** A step's outcome to checkpoint. */
export type StepOutcome = { status: 'completed'; result: unknown } | { status: 'failed'; error: StoredError };

/** An unfinished execution, as the reconciler sees it. */
export interface UnfinishedExecution {
  executionId: string;
  workflowName: string;
  status: WorkflowStatus;
  /** The scan's cursor (with `executionId`): `updated_at` as Postgres text, which keeps its microseconds. */
  cursor: string;
  /** Set when the execution is suspended (sleep, recv, child): when it wakes, in ms since the epoch (Infinity: on a message or a child only). */
  suspendedUntil?: number | null;
  /** A message or a finished child asked a suspended execution to run again. */
  wakeRequested?: boolean;
}

/**
 * The source of truth for workflows. Implementations must make `insert` atomic against the status-filtered
 * unique workflow id, make `checkpoint` write each (execution, position) once, and make every status change
 * a compare-and-set on the current status.
 */
export abstract class WorkflowStore {
  /** Inserts the execution unless the workflow id has a live or completed one; returns whichever holds the id. */
  abstract insert(execution: NewExecution): Promise<{ inserted: boolean; execution: WorkflowExecution & { inputHash: string } }>;
  /**
   * Marks a pending or running execution running and returns it with its checkpoints. Counts a recovery when it
   * was already running (an earlier run was interrupted); past `maxRecoveries` it fails the execution instead.
   */
  abstract begin(executionId: string, maxRecoveries: number): Promise<BeginOutcome>;
  /** Compare-and-set from pending/running to a final status; false when the execution was no longer unfinished. */
  abstract finish(
    executionId: string,
    status: 'completed' | 'failed' | 'timed_out',
    value: { result?: unknown; error?: StoredError; end?: RunEnd },
  ): Promise<boolean>;
  /** Records what the run of a cancelled execution received before it stopped (for `resume()`). */
  abstract recordRunEnd(executionId: string, end: RunEnd): Promise<void>;
  /** Marks a pending (or already running) execution running, without counting a recovery (a task's attempt); false when it is no longer unfinished. */
  abstract markRunning(executionId: string): Promise<boolean>;
  /** Puts a running execution back to pending (graceful shutdown), without counting a recovery. */
  abstract release(executionId: string): Promise<void>;
  /** The execution's status and the checkpoint at a position, if any (a `retrying` row is no checkpoint). */
  abstract stepState(executionId: string, position: number): Promise<{ status: WorkflowStatus | null; checkpoint: StepCheckpoint | null }>;
  /**
   * Writes a checkpoint once, with the next sequence number of the execution (assigned under the execution's row lock,
   * so a number is visible only once every smaller one is; a lost race may leave a gap) or, over a `retrying` row, with
   * that row's number. A loser gets the winner's row. `execution`: the execution as the write saw it.
   */
  abstract checkpoint(
    executionId: string,
    position: number,
    name: string,
    outcome: StepOutcome,
    attempts: number,
    argsHash: string | null,
  ): Promise<{ written: boolean; checkpoint: StepCheckpoint; execution?: CheckpointedExecution }>;
  /**
   * Before an attempt of an enqueued task's job, in one step: marks a pending (or already running) execution running
   * without counting a recovery (`markRunning`), and returns its status after that and the checkpoint at a position
   * (`stepState`).
   */
  abstract startTaskAttempt(executionId: string, position: number): Promise<{ status: WorkflowStatus | null; checkpoint: StepCheckpoint | null }>;
  /**
   * An enqueued task's outcome, in one step: writes the checkpoint as `checkpoint` does and, only when this call wrote
   * it, ends the execution with it as `finish` would (`endStatus`; a compare-and-set: one already finished or cancelled
   * stays so). `execution`: the execution as the write saw it, before its end. A loser gets the winner's row (and
   * finishes nothing).
   */
  abstract checkpointTask(
    executionId: string,
    position: number,
    name: string,
    outcome: StepOutcome,
    attempts: number,
    argsHash: string | null,
    endStatus: 'completed' | 'failed' | 'timed_out',
  ): Promise<{ written: boolean; checkpoint: StepCheckpoint; execution?: CheckpointedExecution }>;
  /** The journal rows with `from <= sequence < to`, in sequence order. */
  abstract recordedBetween(executionId: string, from: number, to: number): Promise<RecordedStep[]>;
  /** One execution by id. */
  abstract get(executionId: string): Promise<WorkflowExecution | null>;
  /** The newest execution of a workflow id: the live or completed one when there is one. */
  abstract latest(workflowId: string): Promise<WorkflowExecution | null>;
  /**
   * Sets the live execution of a workflow id to cancelled; returns it (null when there was none to cancel). With
   * `kind`, only an execution of that kind: workflows and tasks share the id space.
   */
  abstract cancel(workflowId: string, kind?: ExecutionKind): Promise<WorkflowExecution | null>;
  /**
   * Sets a failed or cancelled execution back to pending and marks `retrying` the failed checkpoints its last run did
   * not handle: those whose errors ended it and those it never received (see `RunEnd`; without one, the last
   * recorded failure). They are returned. Throws the unique violation when a newer live execution holds the id.
   */
  abstract resume(executionId: string): Promise<{ execution: WorkflowExecution; retried: StepCheckpoint[] } | null>;
  /** Executions, newest first. */
  abstract list(options: ListWorkflowsOptions & { workflow?: string }): Promise<WorkflowExecution[]>;
  /** The checkpoints of an execution, in position order (`retrying` rows are not listed). */
  abstract steps(executionId: string): Promise<StepCheckpoint[]>;
  /** Pending or running executions not updated for `idleMs`. */
  abstract unfinished(idleMs: number, limit: number, after?: UnfinishedExecution): Promise<UnfinishedExecution[]>;
  /**
   * Counts a recovery of an execution whose job was lost and hands it back as pending (so the re-enqueued run does not
   * count the same incident again); fails it when the count passes `maxRecoveries`. Returns false when it was failed.
   */
  abstract countRecovery(executionId: string, maxRecoveries: number): Promise<boolean>;
  /** Ends unfinished executions past their deadline as timed_out; returns their ids. */
  abstract timeOutExpired(): Promise<string[]>;
  /** Deletes one execution if it has finished and no `result()` call is waiting for it (retention "0"). */
  abstract deleteFinished(executionId: string): Promise<void>;
  /** `result()` waiters of this process, for stores that keep no count of their own (the defaults below). */
  private readonly watchers = new Map<string, number>();

  /**
   * Registers a `result()` waiter on an unfinished execution (so retention "0" keeps it until the waiter has read it)
   * and returns the execution; a finished one is returned without registering. Null when there is none. The default
   * counts waiters in this process only; a store shared by several processes counts them where they all see it.
   */
  async watch(executionId: string): Promise<{ execution: WorkflowExecution; watching: boolean } | null> {
    const execution = await this.get(executionId);
    if (!execution) return null;
    const watching = execution.status === 'pending' || execution.status === 'running';
    if (watching) this.watchers.set(executionId, (this.watchers.get(executionId) ?? 0) + 1);
    return { execution, watching };
  }

  /** Ends a `watch`; with `drop`, deletes the execution when it has finished and this was its last waiter. */
  async unwatch(executionId: string, drop: boolean): Promise<void> {
    const left = (this.watchers.get(executionId) ?? 1) - 1;
    if (left > 0) {
      this.watchers.set(executionId, left);
      return;
    }
    this.watchers.delete(executionId);
    if (drop) await this.deleteFinished(executionId);
  }

  /** Retention "0" at finish: deletes the execution unless a `result()` call is waiting for it (the last one will). */
  removeFinished(executionId: string): Promise<void> {
    return this.watchers.has(executionId) ? Promise.resolve() : this.deleteFinished(executionId);
  }

  /**
   * Runs `work` when this instance holds the cluster-wide reconciler lock; returns false when another instance holds
   * it. `leaseMs`: how long the lock outlives a holder that died without returning it (renewed while `work` runs).
   */
  abstract withReconcilerLock(work: () => Promise<void>, leaseMs?: number): Promise<boolean>;

  /**
   * Registers the durable wait at a journal position, waking `afterMs` from now (null: never by time), unless one is
   * registered there already; returns the wait as stored (a replay compares its kind and argument hash).
   */
  abstract registerWait(executionId: string, position: number, kind: WaitKind, argsHash: string | null, afterMs: number | null): Promise<RegisteredWait>;
  /**
   * Consumes the oldest unread message of `topic` and checkpoints it (`{ message }`, step name `@recv`) at `position`,
   * atomically: a message is consumed exactly once. Returns the checkpoint at the position (an earlier one is
   * returned as it is), or null when no message is waiting.
   */
  abstract receive(executionId: string, position: number, topic: string, argsHash: string | null): Promise<StepCheckpoint | null>;
  /**
   * Stores a message for the live execution of a workflow id (once per idempotency key) and asks it to wake. Returns
   * the execution and whether the message was stored now; a finished execution is returned unchanged (nothing stored).
   * Null when the workflow id has no execution.
   */
  abstract send(workflowId: string, topic: string, message: unknown, idempotencyKey: string | null): Promise<SentMessage | null>;
  /**
   * Hands a running execution back as pending until `untilMs` (ms since the epoch; Infinity: until woken) — a
   * compare-and-set that fails with 'woken' when a wake was requested since the run began.
   */
  abstract suspend(executionId: string, untilMs: number): Promise<SuspendOutcome>;
  /** True when a wake was requested since the execution's run began (`begin` clears it). */
  abstract wakeRequested(executionId: string): Promise<boolean>;
  /** Asks an unfinished execution to wake (a child finished); returns it, or null when it is not unfinished. */
  abstract requestWake(executionId: string): Promise<WorkflowExecution | null>;
  /** Sets (or replaces) the value of an event key of an execution. */
  abstract setEvent(executionId: string, key: string, value: unknown): Promise<void>;
  /** The value of an event key of the newest execution of a workflow id; null when the id has no execution. */
  abstract getEvent(workflowId: string, key: string): Promise<EventRead | null>;
  /** An execution's events, messages and durable waits, for the console (empty lists when it has none). */
  abstract activity(executionId: string): Promise<ExecutionActivity>;
}

/** What an execution set, received and waits for (`setEvent`, `send`/`recv`, `sleep`/`recv` waits), as the console shows it. */
export interface ExecutionActivity {
  /** The latest value per key, by key. */
  events: Array<{ key: string; value: unknown; updatedAt: Date }>;
  /** In send order; `delivered` once a `recv` consumed it (at journal position `receivedAt`), else `pending`. */
  messages: Array<{ seq: number; topic: string; message: unknown; status: 'delivered' | 'pending'; receivedAt: number | null; sentAt: Date }>;
  /** By journal position; `wakeAt` null: no time limit (a `recv` without timeout); `fired` once its outcome is checkpointed. */
  waits: Array<{ position: number; kind: WaitKind; wakeAt: Date | null; fired: boolean }>;
}
