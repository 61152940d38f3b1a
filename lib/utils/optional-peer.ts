import { IdempotencyConfigError } from '../errors/idempotency-config.error';

/** The peer packages that are loaded only when a feature needs them (never by `IdempotencyTestingModule`). */
export interface Peers {
  bullmq: typeof import('bullmq');
  ioredis: typeof import('ioredis');
  'nestjs-cls': typeof import('nestjs-cls');
  typeorm: typeof import('typeorm');
  pg: typeof import('pg');
  '@opentelemetry/api': typeof import('@opentelemetry/api');
  '@nestjs/swagger': typeof import('@nestjs/swagger');
  '@nestjs/terminus': typeof import('@nestjs/terminus');
}

const HOW_TO_DO_WITHOUT: Partial<Record<keyof Peers, string>> = {
  ioredis: ' or set `redis: false` to run on Postgres alone',
  bullmq: ' or remove the @Workflow() classes',
};

/**
 * Loads a peer package on first use, so that importing the library (or running it in test mode) loads none of
 * Postgres, Redis or BullMQ. A missing package fails at startup with an IdempotencyConfigError naming what needs it.
 */
export function loadPeer<K extends keyof Peers>(name: K, neededFor: string): Peers[K] {
  const peer = loadPeerIfInstalled(name);
  if (peer) return peer;
  throw new IdempotencyConfigError([
    `${neededFor}: needs the optional peer dependency "${name}", which is not installed; run \`npm install ${name}\`${HOW_TO_DO_WITHOUT[name] ?? ''}`,
  ]);
}

/** Like {@link loadPeer}, but undefined when the package is not installed (for features that are no-ops without it). */
export function loadPeerIfInstalled<K extends keyof Peers>(name: K): Peers[K] | undefined {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(name) as Peers[K];
  } catch (err) {
    if ((err as { code?: string }).code === 'MODULE_NOT_FOUND' && String((err as Error).message).includes(`'${name}'`)) return undefined;
    throw err;
  }
}
