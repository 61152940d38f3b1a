import { IdempotencyError } from './idempotency.error';

/** `currentTransaction()` was called outside a handler, method, step or inbox handler that runs in the library's transaction. */
export class NotInTransactionError extends IdempotencyError {
  readonly code = 'NOT_IN_TRANSACTION';

  constructor() {
    super(
      'currentTransaction() was called outside a transaction of nestjs-idempotency: turn the transactional mode on with ' +
        '`transaction: true` on @Idempotent(), @IdempotentMethod() or IdempotencyService.run(), or call it inside an InboxService handler',
    );
    this.name = 'NotInTransactionError';
  }
}
