import type { Pool, QueryConfig, QueryResultRow } from 'pg';
import { RecoveryAttemptsExhaustedError } from '../../errors/recovery-attempts-exhausted.error';
import type { StoredError } from '../../errors/workflow-failed.error';
import type { ExecutionKind, ListWorkflowsOptions, StepCheckpoint, WorkflowExecution, WorkflowStatus } from '../workflow.interfaces';
import { retryTransient } from './transient';
import { CallBatcher } from '../../storage/call-batcher';
import {
  BeginOutcome, CheckpointedExecution, EventRead, ExecutionActivity, NewExecution, RecordedStep, RunEnd, SentMessage, StepOutcome, SuspendOutcome, UnfinishedExecution, WaitKind, WorkflowStore, RegisteredWait,
} from './workflow.store';
import { WorkflowSql, workflowSql } from './workflow.sql';
import { EVENTS_TABLE, MESSAGES_TABLE, STEPS_TABLE, WAITS_TABLE } from './workflow.sql';
import { quoteIdent } from '../../storage/postgres/idempotency.sql';
import { withClient } from '../../storage/postgres/checkout';
import { LeaseLock } from '../../storage/postgres/lease-lock';
import { StoreConnection, withPreparedStatements } from '../../storage/postgres/statements';

const FINISHED = new Set<WorkflowStatus>(['completed', 'failed', 'cancelled', 'timed_out']);

/** How many times an insert is retried when it lost a race against a row its snapshot could not see yet. */
const RACE_RETRIES = 5;

interface ExecutionRow extends QueryResultRow {
  id: string;
  workflow_id: string;
  workflow_name: string;
  status: WorkflowStatus;
  input: unknown;
  input_hash: string;
  result: unknown;
  error: StoredError | null;
  recovery_attempts: number;
  created_at: Date;
  updated_at: Date;
  completed_at: Date | null;
  deadline_at: Date | null;
  parent_execution_id?: string | null;
  kind?: ExecutionKind;
  suspended_until?: Date | number | null;
}

export interface StepRow extends QueryResultRow {
  position: number;
  name: string;
  status: 'completed' | 'failed' | 'retrying';
  result: unknown;
  error: StoredError | null;
  attempts: number;
  completed_at: Date | string;
  seq: number;
  args_hash: string | null;
}

/** Maps an execution row (public so that tests and tools can reuse it). */
export function toExecution(row: ExecutionRow): WorkflowExecution & { inputHash: string } {
  return {
    executionId: row.id,
    workflowId: row.workflow_id,
    workflowName: row.workflow_name,
    kind: row.kind ?? 'workflow',
    status: row.status,
    input: row.input,
    inputHash: row.input_hash,
    result: row.result,
    error: row.error,
    recoveryAttempts: row.recovery_attempts,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    completedAt: row.completed_at,
    deadlineAt: row.deadline_at,
    parentExecutionId: row.parent_execution_id ?? null,
    suspendedUntil: suspendedDate(row.suspended_until),
  };
}

/** The latest date JavaScript holds: what an execution suspended until a message or a child shows ('infinity' in Postgres). */
const FAR_AHEAD = new Date(8.64e15);

function suspendedDate(value: Date | number | null | undefined): Date | null {
  if (value === null || value === undefined) return null;
  return value instanceof Date ? value : FAR_AHEAD; // pg parses 'infinity' as the number Infinity
}

/** A journal row; `retrying` rows (being re-run after resume) only come from the journal reads. */
function toRecorded(row: StepRow): RecordedStep {
  return {
    position: row.position,
    name: row.name,
    status: row.status,
    result: row.result,
    error: row.error,
    attempts: row.attempts,
    completedAt: row.completed_at instanceof Date ? row.completed_at : new Date(row.completed_at),
    sequence: row.seq,
    argsHash: row.args_hash,
  };
}

/** A checkpoint row: every statement but the journal reads excludes `retrying` rows. */
export function toCheckpoint(row: StepRow): StepCheckpoint {
  return toRecorded(row) as StepCheckpoint;
}

function json(value: unknown): string | null {
  return value === undefined ? null : JSON.stringify(value);
}

/** An execution's status and the checkpoint at a position (none when the row's step columns are null). */
type StepState = { status: WorkflowStatus | null; checkpoint: StepCheckpoint | null };

function toStepState(row: StepRow & { execution_status: WorkflowStatus }): StepState {
  return { status: row.execution_status, checkpoint: row.name === null ? null : toCheckpoint(row) };
}

/** What an insert answers: whether it inserted, and the execution that holds the workflow id. */
type Inserted = { inserted: boolean; execution: WorkflowExecution & { inputHash: string } };

/** What a checkpoint write answers. */
type CheckpointWrite = { written: boolean; checkpoint: StepCheckpoint; execution: CheckpointedExecution };

function toCheckpointWrite(row: StepRow & { written: boolean; execution_status: WorkflowStatus; recovery_attempts: number }): CheckpointWrite {
  return { written: row.written, checkpoint: toCheckpoint(row), execution: { status: row.execution_status, recoveryAttempts: row.recovery_attempts } };
}

/** The parameters $1–$8 of the checkpoint statements. */
function checkpointValues(executionId: string, position: number, name: string, outcome: StepOutcome, attempts: number, argsHash: string | null): unknown[] {
  return [
    executionId, position, name, outcome.status,
    outcome.status === 'completed' ? json(outcome.result) ?? 'null' : null,
    outcome.status === 'failed' ? json(outcome.error) : null,
    attempts, argsHash,
  ];
}

/**
 * The Postgres workflow store: hand-written prepared statements; every call is retried while the database is
 * unreachable (all statements are idempotent or compare-and-set), so a Postgres restart delays work instead of failing it.
 */
export class PostgresWorkflowStore extends WorkflowStore {
  private statements?: WorkflowSql;

  /** `connection` is read on each call: the pool is opened at module init, after this store is built. */
  constructor(
    private readonly connection: StoreConnection & { readonly pool: Pool },
    private readonly retryForMs = 60_000,
  ) {
    super();
  }

  private get sql(): WorkflowSql {
    return (this.statements ??= withPreparedStatements(workflowSql(this.connection.schema), this.connection.preparedStatements));
  }

  private async query<R extends QueryResultRow>(config: QueryConfig): Promise<R[]> {
    return retryTransient(async () => (await this.connection.pool.query<R>(config)).rows, this.retryForMs);
  }

  /** Executions started in the same turn (task enqueues, workflow starts) share one statement (see CallBatcher). */
  private readonly inserts = new CallBatcher<unknown[], Inserted>(
    (requests) => this.insertMany(requests),
    (values) => this.insertOne(values),
    { retrySingly: true },
  );

  insert(execution: NewExecution): Promise<Inserted> {
    return this.inserts.call([
      execution.executionId, execution.workflowId, execution.workflowName, json(execution.input) ?? 'null', execution.inputHash,
      execution.timeoutMs ?? null, execution.parentExecutionId ?? null, execution.kind ?? 'workflow',
    ]);
  }

  /** One statement for many inserts; a second request for the same workflow id is left to `insertOne`. */
  private async insertMany(requests: unknown[][]): Promise<Array<Inserted | undefined>> {
    const seen = new Set<unknown>();
    const sent: number[] = [];
    requests.forEach((values, i) => {
      if (!seen.has(values[1])) sent.push(i);
      seen.add(values[1]);
    });
    const rows = await this.query<ExecutionRow & { i: number; inserted: boolean }>({
      ...this.sql.insertMany, values: [0, 1, 2, 3, 4, 5, 6, 7].map((k) => sent.map((i) => requests[i][k])),
    });
    const answers = new Array<Inserted | undefined>(requests.length);
    for (const row of rows) answers[sent[row.i - 1]] = { inserted: row.inserted, execution: toExecution(row) };
    return answers;
  }

  private async insertOne(values: unknown[]): Promise<Inserted> {
    for (let attempt = 0; attempt < RACE_RETRIES; attempt++) {
      const rows = await this.query<ExecutionRow & { inserted: boolean }>({ ...this.sql.insert, values });
      if (rows.length > 0) return { inserted: rows[0].inserted, execution: toExecution(rows[0]) };
    }
    throw new Error(`start of workflow id "${String(values[1])}" kept racing with concurrent starts; retry it`);
  }

  async begin(executionId: string, maxRecoveries: number): Promise<BeginOutcome> {
    const rows = await this.query<ExecutionRow & { first_run: boolean | null; steps: StepRow[]; waits: Record<string, { kind: WaitKind; argsHash: string | null; wakeAt: number | null }> | null }>({
      ...this.sql.begin, values: [executionId],
    });
    if (rows.length === 0) return { kind: 'skip', execution: await this.get(executionId) };
    const execution = toExecution(rows[0]);
    if (execution.recoveryAttempts > maxRecoveries) {
      await this.failExhausted(executionId, maxRecoveries);
      return { kind: 'skip', execution: await this.get(executionId) };
    }
    const waits = new Map(Object.entries(rows[0].waits ?? {}).map(([position, w]) => [Number(position), { ...w, wakeAt: w.wakeAt ?? Infinity }]));
    return { kind: 'run', execution, recorded: rows[0].steps.map(toRecorded), waits, firstRun: rows[0].first_run === true };
  }

  async finish(
    executionId: string,
    status: 'completed' | 'failed' | 'timed_out',
    value: { result?: unknown; error?: StoredError; end?: RunEnd },
  ): Promise<boolean> {
    const values = [executionId, status, json(value.result), json(value.error), value.end?.deliveredThrough ?? null, value.end?.endedBy ?? null];
    const { rowCount } = await retryTransient(() => this.connection.pool.query({ ...this.sql.finish, values }), this.retryForMs);
    return (rowCount ?? 0) > 0;
  }

  async recordRunEnd(executionId: string, end: RunEnd): Promise<void> {
    await this.query({ ...this.sql.recordRunEnd, values: [executionId, end.deliveredThrough, end.endedBy] });
  }

  async markRunning(executionId: string): Promise<boolean> {
    return (await this.query({ ...this.sql.markRunning, values: [executionId] })).length > 0;
  }

  async release(executionId: string): Promise<void> {
    await this.query({ ...this.sql.release, values: [executionId] });
  }

  async stepState(executionId: string, position: number): Promise<{ status: WorkflowStatus | null; checkpoint: StepCheckpoint | null }> {
    const rows = await this.query<StepRow & { execution_status: WorkflowStatus }>({ ...this.sql.stepState, values: [executionId, position] });
    if (rows.length === 0) return { status: null, checkpoint: null };
    const row = rows[0];
    return { status: row.execution_status, checkpoint: row.name === null ? null : toCheckpoint(row) };
  }

  async checkpoint(
    executionId: string,
    position: number,
    name: string,
    outcome: StepOutcome,
    attempts: number,
    argsHash: string | null,
  ): Promise<{ written: boolean; checkpoint: StepCheckpoint; execution: CheckpointedExecution }> {
    return this.stepCheckpoints.call([...checkpointValues(executionId, position, name, outcome, attempts, argsHash), null]);
  }

  /** Step checkpoints written in the same turn (concurrent workflows) share one statement (see CallBatcher). */
  private readonly stepCheckpoints = new CallBatcher<unknown[], CheckpointWrite>(
    (requests) => this.checkpointBatch(requests),
    (values) => this.writeCheckpoint(values, async () => {
      const rows = await this.query<StepRow & { written: boolean; execution_status: WorkflowStatus; recovery_attempts: number }>({ ...this.sql.checkpoint, values: values.slice(0, 8) });
      return rows.length > 0 ? toCheckpointWrite(rows[0]) : undefined;
    }),
  );

  /** Runs a checkpoint write until it answers: none means it lost a race its snapshot could not see. */
  private async writeCheckpoint(values: unknown[], write: () => Promise<CheckpointWrite | undefined>): Promise<CheckpointWrite> {
    for (let attempt = 0; attempt < RACE_RETRIES; attempt++) {
      const answer = await write();
      if (answer) return answer;
    }
    throw new Error(`checkpoint of step "${String(values[2])}" (#${String(values[1])}) of execution ${String(values[0])} kept racing; it will be retried`);
  }

  /** Task jobs that start together share one statement (see CallBatcher). */
  private readonly taskStarts = new CallBatcher<{ executionId: string; position: number }, StepState>(
    (requests) => this.startTaskAttempts(requests),
    async (request) => (await this.startTaskAttempts([request]))[0] ?? { status: null, checkpoint: null },
  );

  startTaskAttempt(executionId: string, position: number): Promise<StepState> {
    return this.taskStarts.call({ executionId, position });
  }

  /** One statement for one or many starts; an execution that does not exist is left unanswered. */
  private async startTaskAttempts(requests: Array<{ executionId: string; position: number }>): Promise<Array<StepState | undefined>> {
    const rows = await this.query<StepRow & { i: number; execution_status: WorkflowStatus }>({
      ...this.sql.startTaskAttempts, values: [requests.map((r) => r.executionId), requests.map((r) => r.position)],
    });
    const answers: Array<StepState | undefined> = new Array<StepState | undefined>(requests.length);
    for (const row of rows) answers[row.i - 1] = toStepState(row);
    return answers;
  }

  /** Task outcomes checkpointed in the same turn share one statement (see CallBatcher). */
  private readonly taskCheckpoints = new CallBatcher<unknown[], CheckpointWrite>(
    (requests) => this.checkpointBatch(requests),
    (values) => this.writeCheckpoint(values, async () => (await this.checkpointBatch([values]))[0]),
  );

  checkpointTask(
    executionId: string,
    position: number,
    name: string,
    outcome: StepOutcome,
    attempts: number,
    argsHash: string | null,
    endStatus: 'completed' | 'failed' | 'timed_out',
  ): Promise<CheckpointWrite> {
    return this.taskCheckpoints.call([...checkpointValues(executionId, position, name, outcome, attempts, argsHash), endStatus]);
  }

  /**
   * One statement for one or many checkpoints (end status null) or task outcomes. Left unanswered (written on their own): a
   * second request for the same execution (parallel steps), and one whose statement saw no row (an execution that is
   * gone, or a lost race).
   */
  private async checkpointBatch(requests: unknown[][]): Promise<Array<CheckpointWrite | undefined>> {
    const seen = new Set<string>();
    const sent: number[] = [];
    requests.forEach((values, i) => {
      // One request per execution: each takes the execution's next sequence number, read once per statement.
      const key = String(values[0]);
      if (!seen.has(key)) sent.push(i);
      seen.add(key);
    });
    const column = (k: number) => sent.map((i) => requests[i][k]);
    const rows = await this.query<StepRow & { i: number; written: boolean; execution_status: WorkflowStatus; recovery_attempts: number }>({
      ...this.sql.checkpoints, values: [0, 1, 2, 3, 4, 5, 6, 7, 8].map(column),
    });
    const answers = new Array<CheckpointWrite | undefined>(requests.length);
    for (const row of rows) answers[sent[row.i - 1]] = toCheckpointWrite(row);
    return answers;
  }

  async recordedBetween(executionId: string, from: number, to: number): Promise<RecordedStep[]> {
    return (await this.query<StepRow>({ ...this.sql.recordedBetween, values: [executionId, from, to] })).map(toRecorded);
  }

  async get(executionId: string): Promise<WorkflowExecution | null> {
    const rows = await this.query<ExecutionRow>({ ...this.sql.get, values: [executionId] });
    return rows.length === 0 ? null : toExecution(rows[0]);
  }

  async latest(workflowId: string): Promise<WorkflowExecution | null> {
    const rows = await this.query<ExecutionRow>({ ...this.sql.latest, values: [workflowId] });
    return rows.length === 0 ? null : toExecution(rows[0]);
  }

  async cancel(workflowId: string, kind?: ExecutionKind): Promise<WorkflowExecution | null> {
    const rows = await this.query<ExecutionRow>({ ...this.sql.cancel, values: [workflowId, kind ?? null] });
    return rows.length === 0 ? null : toExecution(rows[0]);
  }

  async resume(executionId: string): Promise<{ execution: WorkflowExecution; retried: StepCheckpoint[] } | null> {
    return retryTransient(() => withClient(this.connection.pool, async (client) => {
      try {
        await client.query('BEGIN');
        const retried = await client.query<StepRow>({ ...this.sql.retryFailedSteps, values: [executionId] });
        const updated = await client.query<ExecutionRow>({ ...this.sql.resume, values: [executionId] });
        if (updated.rows.length === 0) {
          await client.query('ROLLBACK');
          return null;
        }
        await client.query('COMMIT');
        return { execution: toExecution(updated.rows[0]), retried: retried.rows.map(toCheckpoint) };
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      }
    }), this.retryForMs);
  }

  async list(options: ListWorkflowsOptions & { workflow?: string }): Promise<WorkflowExecution[]> {
    const where: string[] = [];
    const values: unknown[] = [];
    if (options.status !== undefined) {
      values.push(Array.isArray(options.status) ? options.status : [options.status]);
      where.push(`status = ANY($${values.length}::text[])`);
    }
    if (options.workflow !== undefined) {
      values.push(options.workflow);
      where.push(`workflow_name = $${values.length}`);
    }
    if (options.parentExecutionId !== undefined) {
      values.push(options.parentExecutionId);
      where.push(`parent_execution_id = $${values.length}::uuid`);
    }
    values.push(options.kind ?? 'workflow');
    where.push(`kind = $${values.length}`);
    values.push(Math.min(Math.max(options.limit ?? 100, 1), 1000));
    const text = `SELECT * FROM ${this.sql.executionsTable} ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''}
      ORDER BY created_at DESC, id DESC LIMIT $${values.length}`;
    return (await this.query<ExecutionRow>({ text, values })).map(toExecution);
  }

  async steps(executionId: string): Promise<StepCheckpoint[]> {
    return (await this.query<StepRow>({ ...this.sql.steps, values: [executionId] })).map(toCheckpoint);
  }

  async unfinished(idleMs: number, limit: number, after?: UnfinishedExecution): Promise<UnfinishedExecution[]> {
    const rows = await this.query<{ id: string; workflow_name: string; status: WorkflowStatus; cursor: string; suspended_ms: number | null; wake_requested: boolean }>({
      ...this.sql.unfinished,
      values: [idleMs, limit, after?.cursor ?? null, after?.executionId ?? null],
    });
    return rows.map((r) => ({
      executionId: r.id, workflowName: r.workflow_name, status: r.status, cursor: r.cursor, suspendedUntil: r.suspended_ms, wakeRequested: r.wake_requested,
    }));
  }

  async countRecovery(executionId: string, maxRecoveries: number): Promise<boolean> {
    const rows = await this.query<{ recovery_attempts: number }>({ ...this.sql.countRecovery, values: [executionId] });
    if (rows.length === 0) return false;
    if (rows[0].recovery_attempts <= maxRecoveries) return true;
    await this.failExhausted(executionId, maxRecoveries);
    return false;
  }

  async timeOutExpired(): Promise<string[]> {
    return (await this.query<{ id: string }>({ ...this.sql.timeOutExpired, values: [] })).map((r) => r.id);
  }

  async deleteFinished(executionId: string): Promise<void> {
    await this.query({ ...this.sql.deleteFinished, values: [executionId] });
  }

  override async watch(executionId: string): Promise<{ execution: WorkflowExecution; watching: boolean } | null> {
    for (let attempt = 1; ; attempt++) {
      const rows = await this.query<ExecutionRow & { watching: boolean }>({ ...this.sql.watch, values: [executionId] });
      if (rows.length === 0) return null;
      const execution = toExecution(rows[0]);
      // Unfinished but not registered: the row changed under the statement (it is finishing); read it again.
      // After RACE_RETRIES the waiter goes on unregistered (only retention "0" needs the registration).
      if (rows[0].watching || FINISHED.has(execution.status) || attempt >= RACE_RETRIES) return { execution, watching: rows[0].watching };
    }
  }

  override async unwatch(executionId: string, drop: boolean): Promise<void> {
    const rows = await this.query<{ result_waiters: number; status: WorkflowStatus }>({ ...this.sql.unwatch, values: [executionId] });
    if (drop && rows.length > 0 && rows[0].result_waiters === 0 && FINISHED.has(rows[0].status)) await this.deleteFinished(executionId);
  }

  async withReconcilerLock(work: () => Promise<void>, leaseMs?: number): Promise<boolean> {
    return (await new LeaseLock(this.connection, this.sql.lockKey, leaseMs).run(work)).acquired;
  }

  async registerWait(executionId: string, position: number, kind: WaitKind, argsHash: string | null, afterMs: number | null): Promise<RegisteredWait> {
    const gone = () => new Error(`wait #${position} of execution ${executionId} could not be registered (the execution no longer exists)`);
    const values = [executionId, position, kind, afterMs === null ? null : Math.round(afterMs), argsHash];
    const rows = await this.query<{ kind: WaitKind; args_hash: string | null; wake_ms: number | null }>({ ...this.sql.registerWait, values })
      .catch((err: Error & { code?: string }) => {
        throw err.code === '23503' ? gone() : err; // foreign key: the execution was removed
      });
    if (rows.length === 0) throw gone();
    return { kind: rows[0].kind, argsHash: rows[0].args_hash, wakeAt: rows[0].wake_ms ?? Infinity };
  }

  async receive(executionId: string, position: number, topic: string, argsHash: string | null): Promise<StepCheckpoint | null> {
    const rows = await this.query<StepRow & { written: boolean }>({ ...this.sql.receive, values: [executionId, position, topic, argsHash] });
    return rows.length === 0 ? null : toCheckpoint(rows[0]);
  }

  async send(workflowId: string, topic: string, message: unknown, idempotencyKey: string | null): Promise<SentMessage | null> {
    const rows = await this.query<ExecutionRow & { stored: boolean; duplicate: boolean }>({ ...this.sql.send, values: [workflowId, topic, json(message) ?? 'null', idempotencyKey] });
    return rows.length === 0 ? null : { execution: toExecution(rows[0]), stored: rows[0].stored, duplicate: rows[0].duplicate };
  }

  async suspend(executionId: string, untilMs: number): Promise<SuspendOutcome> {
    const rows = await this.query<{ suspended: boolean; status: WorkflowStatus }>({ ...this.sql.suspend, values: [executionId, untilMs] });
    if (rows[0]?.suspended) return 'suspended';
    return rows[0]?.status === 'running' ? 'woken' : 'stopped';
  }

  async wakeRequested(executionId: string): Promise<boolean> {
    const rows = await this.query<{ wake_requested: boolean }>({ ...this.sql.wakeRequested, values: [executionId] });
    return rows[0]?.wake_requested ?? false;
  }

  async requestWake(executionId: string): Promise<WorkflowExecution | null> {
    const rows = await this.query<ExecutionRow>({ ...this.sql.requestWake, values: [executionId] });
    return rows.length === 0 ? null : toExecution(rows[0]);
  }

  async setEvent(executionId: string, key: string, value: unknown): Promise<void> {
    await this.query({ ...this.sql.setEvent, values: [executionId, key, json(value) ?? 'null'] });
  }

  async getEvent(workflowId: string, key: string): Promise<EventRead | null> {
    const rows = await this.query<ExecutionRow & { event_value: unknown; event_found: boolean }>({ ...this.sql.getEvent, values: [workflowId, key] });
    if (rows.length === 0) return null;
    return { execution: toExecution(rows[0]), found: rows[0].event_found, value: rows[0].event_found ? rows[0].event_value : null };
  }

  async activity(executionId: string): Promise<ExecutionActivity> {
    const table = (name: string) => `${quoteIdent(this.connection.schema)}.${quoteIdent(name)}`;
    const [events, messages, waits] = await Promise.all([
      this.query<{ key: string; value: unknown; updated_at: Date }>({
        text: `SELECT key, value, updated_at FROM ${table(EVENTS_TABLE)} WHERE execution_id = $1 ORDER BY key`, values: [executionId],
      }),
      this.query<{ seq: string; topic: string; message: unknown; consumed_position: number | null; created_at: Date }>({
        text: `SELECT seq, topic, message, consumed_position, created_at FROM ${table(MESSAGES_TABLE)} WHERE execution_id = $1 ORDER BY seq`, values: [executionId],
      }),
      this.query<{ position: number; kind: WaitKind; wake_at: Date | number; fired: boolean }>({
        text: `SELECT w.position, w.kind, w.wake_at,
                      EXISTS (SELECT 1 FROM ${table(STEPS_TABLE)} s WHERE s.execution_id = w.execution_id AND s.position = w.position) AS fired
                 FROM ${table(WAITS_TABLE)} w WHERE w.execution_id = $1 ORDER BY w.position`,
        values: [executionId],
      }),
    ]);
    return {
      events: events.map((r) => ({ key: r.key, value: r.value, updatedAt: r.updated_at })),
      messages: messages.map((r) => ({
        seq: Number(r.seq), topic: r.topic, message: r.message, status: r.consumed_position === null ? 'pending' : 'delivered', receivedAt: r.consumed_position, sentAt: r.created_at,
      })),
      // pg parses 'infinity' (a recv without timeout) as the number Infinity
      waits: waits.map((r) => ({ position: r.position, kind: r.kind, wakeAt: r.wake_at instanceof Date ? r.wake_at : null, fired: r.fired })),
    };
  }

  private async failExhausted(executionId: string, maxRecoveries: number): Promise<void> {
    await this.finish(executionId, 'failed', { error: RecoveryAttemptsExhaustedError.stored(maxRecoveries) });
  }
}
