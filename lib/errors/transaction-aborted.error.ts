import { IdempotencyError } from './idempotency.error';

/**
 * The work (an inbox handler, a transactional handler, method or step) returned normally, but a statement it ran in
 * the library's transaction had failed and the error was caught: Postgres aborted the transaction, so nothing of it
 * committed — its writes, the claim and the outcome included. `cause` is the statement's error when the library saw it.
 */
export class TransactionAbortedError extends IdempotencyError {
  readonly code = 'TRANSACTION_ABORTED';

  constructor(work: string, cause?: unknown) {
    const failed = cause instanceof Error ? ` (${cause.message})` : '';
    super(
      `${work} returned, but a statement it ran in the transaction had failed${failed} and its error was caught: Postgres ` +
        'aborted the transaction, so nothing of it was committed. Let the error propagate, or run a statement that may fail ' +
        'in a savepoint of its own: `await manager.transaction((inner) => …)` rolls back only that part',
      cause === undefined ? undefined : { cause },
    );
    this.name = 'TransactionAbortedError';
  }
}
