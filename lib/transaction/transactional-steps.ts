import type { QueryResultRow } from 'pg';
import type { CheckpointedExecution, StepOutcome } from '../workflow/storage/workflow.store';
import { StepRow, toCheckpoint } from '../workflow/storage/postgres-workflow.store';
import { isTransientDatabaseError } from '../workflow/storage/transient';
import { workflowSql, WorkflowSql } from '../workflow/storage/workflow.sql';
import type { StepCheckpoint, WorkflowStatus } from '../workflow/workflow.interfaces';
import { IdempotencyConnections } from '../storage/idempotency-connections';
import { withPreparedStatements } from '../storage/postgres/statements';
import { withTransaction } from './current-transaction';
import { IdempotencyTransactions, OpenTransaction } from './idempotency-transactions';
import { isConflict, runAgainOnConflict } from './transaction-conflicts';
import { probeTransaction } from './transaction-probe';
import { inFailedTransaction } from './sql-state';
import { TransactionAbortedError } from '../errors/transaction-aborted.error';
import type { InlineStatement } from './inline-statement';
import type { TransactionIsolation } from './transaction-options';

/** The checkpoint a step attempt writes. */
export interface StepEntry {
  executionId: string;
  position: number;
  name: string;
  attempts: number;
  argsHash: string | null;
}

/** The step's state, as `WorkflowStore.stepState` reads it: with a checkpoint once the step has one. */
export interface StepState {
  status: WorkflowStatus | null;
  checkpoint: StepCheckpoint | null;
}

/** The start of the error the check after a transactional checkpoint fails with when the checkpoint is not its own. */
const NOT_WRITTEN = 'idempotency: the step checkpoint was not written by this transaction; rows written: ';

type StepStateRow = StepRow & { execution_status: WorkflowStatus };
/** What the checkpoint statement returns: the row, with its execution as the write saw it. */
type CheckpointRow = StepStateRow & { recovery_attempts: number };

/**
 * `@Step({ transaction: true })`: the step's state is read as the first statement of a transaction of the library
 * (one round trip with its START), the attempt runs in it, and a completed outcome is checkpointed and committed
 * in one more round trip, so the step's writes and its checkpoint commit together. The first start of a fresh job
 * reads nothing (as a step without a transaction does not): its START goes with the step's first statement, so
 * with one statement of its own the step costs two round trips. A worker killed mid-step leaves nothing; a
 * second worker finishing the same step finds the first one's checkpoint (the check after the checkpoint fails, so
 * nothing commits) and adopts it. A step that caught a failed statement's error and returned cannot commit (Postgres
 * aborted the transaction): TransactionAbortedError, the attempt's failure. A failed outcome rolls the writes back and
 * is checkpointed on its own — unless
 * the transaction's connection was lost (Postgres restarting), which is thrown so BullMQ runs the job again.
 */
export class TransactionalSteps {
  private statements?: { sql: WorkflowSql; written: InlineStatement['statement'] };

  constructor(
    private readonly transactions: IdempotencyTransactions,
    private readonly connections: IdempotencyConnections,
    private readonly acquireWithinMs: number,
  ) {}

  /**
   * Reads the step's state in a new transaction; when it has no checkpoint yet and its execution is running, runs
   * `attempt` in it and checkpoints a completed outcome before the commit (a failed one by `checkpointAlone`).
   * Resolves the state, with the checkpoint this call wrote or adopted (and the execution as that write saw it);
   * without one when the execution stopped. `fresh`: the first start of a fresh step job, which no checkpoint can
   * precede (see `StepJobData.fresh`): nothing is read, and the START goes with the step's first statement (or with
   * the checkpoint), so the step costs one round trip less.
   */
  async run(
    isolation: TransactionIsolation, entry: StepEntry, attempt: () => Promise<StepOutcome>,
    checkpointAlone: (outcome: StepOutcome) => Promise<{ checkpoint: StepCheckpoint; execution?: CheckpointedExecution }>, fresh = false,
  ): Promise<StepState & { execution?: CheckpointedExecution }> {
    // At 'repeatable read' and 'serializable', Postgres aborts a transaction that conflicts with a concurrent one
    // (the checkpoint's own reads can), and so does a deadlock: nothing of it committed, and Postgres's advice is
    // to run it again. Failing the job instead would wait for the run to find it gone, and count as a lost job.
    return runAgainOnConflict(() => this.runOnce(isolation, entry, attempt, checkpointAlone, fresh), isConflict);
  }

  private async runOnce(
    isolation: TransactionIsolation, entry: StepEntry, attempt: () => Promise<StepOutcome>,
    checkpointAlone: (outcome: StepOutcome) => Promise<{ checkpoint: StepCheckpoint; execution?: CheckpointedExecution }>, fresh: boolean,
  ): Promise<StepState & { execution?: CheckpointedExecution }> {
    const { sql, written } = this.sql();
    let tx: OpenTransaction;
    let status: WorkflowStatus | null = 'running';
    if (fresh) {
      tx = await this.transactions.beginOnFirstStatement(isolation, this.acquireWithinMs, [sql.checkpoint, written]);
    } else {
      const begun = await this.transactions.beginWith(
        isolation, this.acquireWithinMs, { statement: sql.stepState, values: [entry.executionId, entry.position] }, [sql.checkpoint, written],
      );
      tx = begun.tx;
      const state = stateOf(begun.rows);
      if (state.checkpoint || (state.status !== 'running' && state.status !== 'pending')) {
        await tx.rollback();
        return state;
      }
      status = state.status;
    }
    let outcome: StepOutcome;
    try {
      outcome = await withTransaction(tx.manager, attempt);
    } catch (err) {
      await tx.rollback(); // a retried attempt: BullMQ runs the job again
      throw err;
    }
    if (outcome.status !== 'completed') {
      const lost = await connectionLost(tx);
      await tx.rollback();
      // Postgres cut the transaction's connection (a restart): the library's failure, not the step's — run the job again
      if (lost) throw lost;
      const alone = await checkpointAlone(outcome);
      return { status, checkpoint: alone.checkpoint, execution: alone.execution };
    }
    const values = [entry.executionId, entry.position, entry.name, 'completed', JSON.stringify(outcome.result ?? null), null, entry.attempts, entry.argsHash];
    let results: QueryResultRow[][];
    try {
      // should the commit fail, the job runs again and adopts the checkpoint if the commit went through
      results = await tx.commitAfter([{ statement: sql.checkpoint, values }, { statement: written, values: [entry.executionId, entry.position] }]);
    } catch (err) {
      // The step caught a failed statement's error and returned: Postgres had aborted its transaction, nothing committed.
      if (inFailedTransaction(err)) throw new TransactionAbortedError(`step "${entry.name}" (#${entry.position}) of execution ${entry.executionId}`, tx.abortedBy);
      if (!(err instanceof Error && err.message.includes(NOT_WRITTEN))) throw err;
      // Another worker's checkpoint stands (or committed after this statement's snapshot): its writes count, these were undone.
      const adopted = stateOf((await this.connections.pool.query<StepStateRow>({ ...sql.stepState, values: [entry.executionId, entry.position] })).rows);
      if (!adopted.checkpoint) throw new Error(`checkpoint of step "${entry.name}" (#${entry.position}) of execution ${entry.executionId} raced and is not there yet; it will be retried`);
      return adopted;
    }
    const row = results[0][0] as CheckpointRow;
    return { status, checkpoint: toCheckpoint(row), execution: { status: row.execution_status, recoveryAttempts: row.recovery_attempts } };
  }

  private sql(): { sql: WorkflowSql; written: InlineStatement['statement'] } {
    if (this.statements) return this.statements;
    const sql = withPreparedStatements(workflowSql(this.connections.schema), this.connections.preparedStatements);
    // After the checkpoint, in the same transaction: fails unless the step's row is this transaction's own (its xmin
    // is this transaction's id), so that the COMMIT after it never runs when another worker's checkpoint stands.
    // The failing cast is computed from the aggregate, so the planner cannot fold it beforehand.
    const text = `
      SELECT CAST('${NOT_WRITTEN}' || count(*) AS int) FROM ${sql.stepsTable}
       WHERE execution_id = $1::uuid AND position = $2::int AND xmin = (txid_current() % 4294967296)::text::xid
      HAVING count(*) = 0`;
    const written = sql.checkpoint.name ? { name: `${sql.checkpoint.name}_written`, text } : { text };
    return (this.statements = { sql, written });
  }
}

/** The state `WorkflowStore.stepState` reads, from the rows of its statement. */
function stateOf(rows: QueryResultRow[]): StepState {
  if (rows.length === 0) return { status: null, checkpoint: null };
  const row = rows[0] as StepStateRow;
  return { status: row.execution_status, checkpoint: row.name === null ? null : toCheckpoint(row) };
}

/** The error that shows the transaction's connection is gone (lost or released after an error), or undefined. */
async function connectionLost(tx: OpenTransaction): Promise<Error | undefined> {
  const err = await probeTransaction(tx);
  if (err === undefined) return undefined;
  // TypeORM releases a query runner whose connection failed
  const released = err instanceof Error && /^QueryRunner(Provider)?AlreadyReleasedError$/.test(err.name);
  return released || isTransientDatabaseError(err) ? (err as Error) : undefined; // an aborted transaction (25P02) is the step's own failure
}
