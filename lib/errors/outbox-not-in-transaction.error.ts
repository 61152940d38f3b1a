import { IdempotencyError } from './idempotency.error';

/** `OutboxService.publish()` was given an EntityManager outside a transaction, so the message could outlive a rollback. */
export class OutboxNotInTransactionError extends IdempotencyError {
  readonly code = 'OUTBOX_NOT_IN_TRANSACTION';

  constructor() {
    super(
      'OutboxService.publish() needs the EntityManager of an open transaction, so the message commits or rolls back with your writes: ' +
        'call it inside dataSource.transaction(async (manager) => { …; await outbox.publish(manager, message) })',
    );
    this.name = 'OutboxNotInTransactionError';
  }
}
