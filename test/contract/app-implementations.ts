import { INestApplication, ModuleMetadata } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { IdempotencyModule, IdempotencyTestingModule } from '../../lib';
import { listen } from '../support/resilience';
import { databaseUrl, redisUrl, uniqueSchema } from '../support/test-app';
import { FAST, uniquePrefix } from '../workflow/support';

/** A running app of one implementation, listening on 127.0.0.1. */
export interface RunningApp {
  app: INestApplication;
  url: string;
}

/** How to build an app with the library on one implementation. */
export interface AppImplementation {
  name: string;
  imports(): ModuleMetadata['imports'];
}

/**
 * The library as an app sees it: `IdempotencyModule` on real Postgres, Redis and BullMQ, and
 * `IdempotencyTestingModule` in memory with workflows run in process. Engine-level contract cases run on both.
 */
export const APP_IMPLEMENTATIONS: AppImplementation[] = [
  {
    name: 'IdempotencyModule (Postgres + Redis + BullMQ)',
    imports: () => {
      const schema = uniqueSchema('engine');
      return [
        IdempotencyModule.forRoot({
          postgres: { url: databaseUrl(), schema },
          redis: { url: redisUrl(), keyPrefix: `idem-${schema}` },
          migrationsRun: true,
          workflows: { ...FAST, queuePrefix: uniquePrefix() },
        }),
      ];
    },
  },
  { name: 'IdempotencyTestingModule (in memory)', imports: () => [IdempotencyTestingModule.forRoot()] },
];

/** Boots an app of `implementation` with the given controllers and providers before the suite, closes it after. */
export function appForSuite(implementation: AppImplementation, metadata: Pick<ModuleMetadata, 'controllers' | 'providers'>): () => RunningApp {
  let running: RunningApp | undefined;
  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({ imports: implementation.imports(), ...metadata }).compile();
    const app = moduleRef.createNestApplication();
    app.useLogger(false);
    await app.init();
    running = { app, url: await listen(app) };
  });
  afterAll(async () => {
    await running?.app.close();
  });
  return () => {
    if (!running) throw new Error(`${implementation.name} did not boot`);
    return running;
  };
}
