import { IdempotencyConfigError } from '../errors/idempotency-config.error';

/** The peer packages that are loaded only when a feature needs them (never by `IdempotencyTestingModule`). */
export interface Peers {
  bullmq: typeof import('bullmq');
  ioredis: typeof import('ioredis');
  typeorm: typeof import('typeorm');
}

/**
 * Loads a peer package on first use, so that importing the library (or running it in test mode) loads none of
 * Postgres, Redis or BullMQ. A missing package fails with an IdempotencyConfigError that says what needs it.
 */
export function loadPeer<K extends keyof Peers>(name: K, neededFor: string): Peers[K] {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(name) as Peers[K];
  } catch (err) {
    if ((err as { code?: string }).code === 'MODULE_NOT_FOUND' && (err as Error).message.includes(`'${name}'`)) {
      throw new IdempotencyConfigError([`${neededFor} needs the "${name}" package: npm install ${name}`]);
    }
    throw err;
  }
}
