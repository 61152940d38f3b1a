import { IdempotencyConfigError } from '../errors/idempotency-config.error';

/** The optional peer dependencies, loaded only when the options use them. */
export type OptionalPeer = 'ioredis' | 'bullmq';

/**
 * Loads an optional peer dependency on first use, so an app without Redis (`redis: false`) or without workflows
 * needs neither `ioredis` nor `bullmq` installed; a missing one fails at startup naming the option that needs it.
 */
export function requirePeer<T>(name: OptionalPeer, neededBy: string): T {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(name) as T;
  } catch (err) {
    const missing = (err as { code?: string }).code === 'MODULE_NOT_FOUND' && String((err as Error).message).includes(`'${name}'`);
    if (!missing) throw err;
    throw new IdempotencyConfigError([
      `${neededBy}: needs the optional peer dependency "${name}", which is not installed; run \`npm install ${name}\`` +
        (name === 'ioredis' ? ' or set `redis: false` to run on Postgres alone' : ' or remove the @Workflow() classes'),
    ]);
  }
}
