import { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { IdempotencyCache, IdempotencyService, IdempotencyStore, IdempotencyTestingModule, WorkflowStore } from '../../lib';
import { createTestApp, uniqueSchema } from '../support/test-app';

/** What a contract test drives: the engine with its store and cache, and the workflow store. */
export interface Subject {
  service: IdempotencyService;
  store: IdempotencyStore;
  cache: IdempotencyCache;
  workflows: WorkflowStore;
  close(): Promise<void>;
}

/** One implementation of the stores under the shared contract. */
export interface Implementation {
  name: string;
  boot(): Promise<Subject>;
}

function subjectOf(app: INestApplication): Subject {
  return {
    service: app.get(IdempotencyService),
    store: app.get(IdempotencyStore),
    cache: app.get(IdempotencyCache),
    workflows: app.get(WorkflowStore),
    close: () => app.close(),
  };
}

/**
 * Every implementation the library ships: Postgres with Redis in front (IdempotencyModule, real servers) and the
 * in-memory stores of IdempotencyTestingModule. The contract suites run each case against both, so they cannot drift.
 */
export const IMPLEMENTATIONS: Implementation[] = [
  {
    name: 'Postgres + Redis',
    boot: async () => subjectOf(await createTestApp({ adapter: 'express', schema: uniqueSchema('contract'), controllers: [] })),
  },
  {
    name: 'in-memory (IdempotencyTestingModule)',
    boot: async () => {
      const moduleRef = await Test.createTestingModule({ imports: [IdempotencyTestingModule.forRoot()] }).compile();
      const app = moduleRef.createNestApplication();
      app.useLogger(false);
      await app.init();
      return subjectOf(app);
    },
  },
];

/** Boots `implementation` before the suite's cases and closes it after them; the returned subject reads the booted one. */
export function bootForSuite(implementation: Implementation): Subject {
  let booted: Subject | undefined;
  beforeAll(async () => {
    booted = await implementation.boot();
  });
  afterAll(async () => {
    await booted?.close();
  });
  const current = (): Subject => {
    if (!booted) throw new Error(`${implementation.name} did not boot`);
    return booted;
  };
  return {
    get service() {
      return current().service;
    },
    get store() {
      return current().store;
    },
    get cache() {
      return current().cache;
    },
    get workflows() {
      return current().workflows;
    },
    close: () => current().close(),
  };
}
