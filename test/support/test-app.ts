import { INestApplication, INestApplicationContext, Module, ModuleMetadata, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { IdempotencyModule, IdempotencyModuleOptions } from '../../lib';

export type AdapterName = 'express' | 'fastify';
export const ADAPTERS: AdapterName[] = ['express', 'fastify'];

export function databaseUrl(): string {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error('DATABASE_URL is not set: run the suite with `npm test`, which starts Postgres and Redis');
  return url;
}

/** The suite's database URL with `applicationName` as its connections' application_name (seen in pg_stat_activity). */
export function databaseUrlNamed(applicationName: string): string {
  const url = new URL(databaseUrl());
  url.searchParams.set('application_name', applicationName);
  return url.toString();
}

export function redisUrl(): string {
  const url = process.env.REDIS_URL;
  if (!url) throw new Error('REDIS_URL is not set: run the suite with `npm test`, which starts Postgres and Redis');
  return url;
}

/** A fresh schema name, so each suite sees only its own records. */
export function uniqueSchema(prefix = 't'): string {
  return `${prefix}_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
}

export interface TestAppOptions {
  adapter: AdapterName;
  controllers: Type<unknown>[];
  providers?: ModuleMetadata['providers'];
  options?: Partial<IdempotencyModuleOptions>;
  schema?: string;
  /** Modules imported before and after IdempotencyModule (the order of app-wide enhancers follows it). */
  importsBefore?: ModuleMetadata['imports'];
  importsAfter?: ModuleMetadata['imports'];
  /** Called on the app before init, e.g. for `useGlobalInterceptors`. */
  configure?: (app: INestApplication) => void;
}

/** Builds a Nest app on the chosen adapter with IdempotencyModule against the suite's Postgres and Redis. */
export async function createTestApp(config: TestAppOptions): Promise<INestApplication> {
  const schema = config.schema ?? uniqueSchema();
  const moduleRef = await Test.createTestingModule({
    imports: [
      ...(config.importsBefore ?? []),
      IdempotencyModule.forRoot({
        postgres: { url: databaseUrl(), schema },
        redis: { url: redisUrl(), keyPrefix: `idem-${schema}` },
        migrationsRun: true,
        ...config.options,
      }),
      ...(config.importsAfter ?? []),
    ],
    controllers: config.controllers,
    providers: config.providers ?? [],
  }).compile();
  const app = config.adapter === 'fastify'
    ? moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter())
    : moduleRef.createNestApplication();
  app.useLogger(false);
  config.configure?.(app);
  await app.init();
  if (config.adapter === 'fastify') await (app as NestFastifyApplication).getHttpAdapter().getInstance().ready();
  return app;
}

/**
 * An app without HTTP, with IdempotencyModule against the suite's Postgres (in `schema`) and Redis; `options` override.
 * `appOptions` go to Nest (silent unless a `logger` is given).
 */
export async function createEngineContext(
  schema: string, options: Partial<IdempotencyModuleOptions> = {}, appOptions: Parameters<typeof NestFactory.createApplicationContext>[1] = {},
): Promise<INestApplicationContext> {
  const idempotency = IdempotencyModule.forRoot({
    postgres: { url: databaseUrl(), schema },
    redis: { url: redisUrl(), keyPrefix: `idem-${schema}` },
    migrationsRun: true,
    ...options,
  });
  @Module({ imports: [idempotency] })
  class EngineContextModule {}
  return NestFactory.createApplicationContext(EngineContextModule, { logger: false, ...appOptions });
}

/** Runs a query against the suite's database. */
export async function sql<T = Record<string, unknown>>(text: string, values: unknown[] = []): Promise<T[]> {
  const client = new Client({ connectionString: databaseUrl() });
  await client.connect();
  try {
    return (await client.query(text, values)).rows as T[];
  } finally {
    await client.end();
  }
}
