import type { StepOutcome } from '../workflow/storage/workflow.store';
import { StepRow, toCheckpoint } from '../workflow/storage/postgres-workflow.store';
import { isTransientDatabaseError } from '../workflow/storage/transient';
import { workflowSql, WorkflowSql } from '../workflow/storage/workflow.sql';
import type { StepCheckpoint } from '../workflow/workflow.interfaces';
import { IdempotencyConnections } from '../storage/idempotency-connections';
import { withTransaction } from './current-transaction';
import { IdempotencyTransactions, OpenTransaction } from './idempotency-transactions';
import type { TransactionIsolation } from './transaction-options';

/** How many times the checkpoint is asked again when it lost a race against a row its snapshot could not see yet. */
const RACE_RETRIES = 5;

/** The checkpoint a step attempt writes. */
export interface StepEntry {
  executionId: string;
  position: number;
  name: string;
  attempts: number;
  argsHash: string | null;
}

type Written = { written: boolean; checkpoint: StepCheckpoint };

/**
 * `@Step({ transaction: true })`: the attempt runs in a transaction of the library and a completed outcome is
 * checkpointed inside it, so the step's writes and its checkpoint commit together. A worker killed mid-step leaves
 * nothing; a second worker finishing the same step finds the first one's checkpoint, rolls its own writes back and
 * adopts it. A failed outcome rolls the writes back and is checkpointed on its own — unless the transaction's
 * connection was lost (Postgres restarting), which is thrown so BullMQ runs the job again.
 */
export class TransactionalSteps {
  private statements?: WorkflowSql;

  constructor(
    private readonly transactions: IdempotencyTransactions,
    private readonly connections: IdempotencyConnections,
    private readonly acquireWithinMs: number,
  ) {}

  async run(isolation: TransactionIsolation, entry: StepEntry, attempt: () => Promise<StepOutcome>, checkpointAlone: (outcome: StepOutcome) => Promise<Written>): Promise<Written> {
    const tx = await this.transactions.begin(isolation, this.acquireWithinMs);
    let outcome: StepOutcome;
    let written: Written;
    try {
      outcome = await withTransaction(tx.manager, attempt);
      if (outcome.status === 'completed') written = await this.checkpoint(entry, outcome, (text, values) => tx.query(text, values));
    } catch (err) {
      await tx.rollback(); // a retried attempt, or Postgres failing: BullMQ runs the job again
      throw err;
    }
    if (outcome.status !== 'completed') {
      const lost = await connectionLost(tx);
      await tx.rollback();
      // Postgres cut the transaction's connection (a restart): the library's failure, not the step's — run the job again
      if (lost) throw lost;
      return checkpointAlone(outcome);
    }
    if (!written!.written) {
      await tx.rollback(); // another worker's checkpoint stands: its writes count, these are undone
      return written!;
    }
    await tx.commit(); // should it fail, the job runs again and adopts the checkpoint if the commit went through
    return written!;
  }

  private async checkpoint(entry: StepEntry, outcome: StepOutcome & { status: 'completed' }, query: <R>(text: string, values: unknown[]) => Promise<R[]>): Promise<Written> {
    const sql = (this.statements ??= workflowSql(this.connections.schema));
    const values = [entry.executionId, entry.position, entry.name, 'completed', JSON.stringify(outcome.result ?? null), null, entry.attempts, entry.argsHash];
    for (let i = 0; i < RACE_RETRIES; i++) {
      const rows = await query<StepRow & { written: boolean }>(sql.checkpoint.text, values);
      if (rows.length > 0) return { written: rows[0].written, checkpoint: toCheckpoint(rows[0]) };
    }
    throw new Error(`checkpoint of step "${entry.name}" (#${entry.position}) of execution ${entry.executionId} kept racing; it will be retried`);
  }
}

/** The error that shows the transaction's connection is gone (lost or released after an error), or undefined. */
async function connectionLost(tx: OpenTransaction): Promise<Error | undefined> {
  try {
    await tx.query('SELECT 1', []);
    return undefined;
  } catch (err) {
    // TypeORM releases a query runner whose connection failed
    const released = err instanceof Error && /^QueryRunner(Provider)?AlreadyReleasedError$/.test(err.name);
    return released || isTransientDatabaseError(err) ? (err as Error) : undefined; // an aborted transaction (25P02) is the step's own failure
  }
}
