import { IdempotencyError } from './idempotency.error';

/** A duplicate call was refused (`onDuplicate: "raise"`), or found the first call still running. */
export class DuplicateExecutionError extends IdempotencyError {
  readonly code = 'DUPLICATE_EXECUTION';

  constructor(
    readonly key: string,
    readonly status: 'in_progress' | 'completed',
  ) {
    super(
      status === 'completed'
        ? `a call with idempotency key "${key}" already completed; use onDuplicate: "return" to get its result`
        : `a call with idempotency key "${key}" is still running; retry later or use onDuplicate: "wait"`,
    );
    this.name = 'DuplicateExecutionError';
  }
}
