/** Thrown at bootstrap when module options are invalid; the message names each option and its fix. */
export class IdempotencyConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid IdempotencyModule options:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'IdempotencyConfigError';
  }
}
