import { IdempotencyError } from './idempotency.error';

/** Thrown at bootstrap when options (module or decorator) are invalid; the message names each option and its fix. */
export class IdempotencyConfigError extends IdempotencyError {
  readonly code: string = 'CONFIG_INVALID';

  constructor(readonly problems: string[], heading = 'Invalid IdempotencyModule options') {
    super(`${heading}:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'IdempotencyConfigError';
  }
}
