import { INestApplication, ModuleMetadata } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { randomUUID } from 'node:crypto';
import { IdempotencyModule, IdempotencyModuleOptions, WorkflowClient, WorkflowModuleOptions } from '../../lib';
import { databaseUrl, redisUrl, uniqueSchema } from '../support/test-app';
import { RUN_LOG_OPTIONS, RunLog } from './fixtures/run-log';

/** Fast recovery settings for tests: a crashed worker's jobs are taken over within about a second. */
export const FAST: WorkflowModuleOptions = {
  lockDuration: 1500,
  stalledInterval: 500,
  recoveryInterval: 500,
  pollInterval: 200,
  maxRecoveryAttempts: 10,
};

/** A unique BullMQ prefix per suite; the hash tag keeps each suite's keys together (cluster-friendly). */
export function uniquePrefix(): string {
  return `{wf-${randomUUID().slice(0, 8)}}`;
}

/** Settings shared by every app of one scenario. */
export interface Scenario {
  schema: string;
  prefix: string;
  databaseUrl: string;
  redisUrl: string;
}

/** A new scenario: own schema, own queue prefix. */
export function scenario(overrides: Partial<Scenario> = {}): Scenario {
  return { schema: uniqueSchema('wf'), prefix: uniquePrefix(), databaseUrl: databaseUrl(), redisUrl: redisUrl(), ...overrides };
}

/** Boots an app with IdempotencyModule (workflows on), the run log, and the given workflow providers. */
export async function bootWorkflowApp(
  s: Scenario,
  providers: ModuleMetadata['providers'],
  workflows: WorkflowModuleOptions = {},
  extra: Partial<IdempotencyModuleOptions> = {},
): Promise<{ app: INestApplication; client: WorkflowClient; log: RunLog }> {
  const moduleRef = await Test.createTestingModule({
    imports: [
      IdempotencyModule.forRoot({
        postgres: { url: s.databaseUrl, schema: s.schema },
        redis: { url: s.redisUrl, keyPrefix: `idem-${s.schema}` },
        migrationsRun: true,
        workflows: { ...FAST, queuePrefix: s.prefix, ...workflows },
        ...extra,
      }),
    ],
    providers: [{ provide: RUN_LOG_OPTIONS, useValue: { url: s.databaseUrl, schema: s.schema } }, RunLog, ...(providers ?? [])],
  }).compile();
  const app = moduleRef.createNestApplication();
  app.useLogger(process.env.WF_TEST_LOG ? ['log', 'warn', 'error'] : false);
  await app.init();
  const log = app.get(RunLog);
  await log.ensure();
  return { app, client: app.get(WorkflowClient), log };
}
