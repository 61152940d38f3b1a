import { INestApplication, LoggerService, ModuleMetadata, Type } from '@nestjs/common';
import { NestExpressApplication } from '@nestjs/platform-express';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { IdempotencyModule, IdempotencyModuleOptions } from '../../lib';
import { listen } from './resilience';
import { AdapterName, databaseUrl, redisUrl, sql, uniqueSchema } from './test-app';

export interface ConfiguredApp {
  app: INestApplication;
  url: string;
  schema: string;
  close(): Promise<void>;
}

/** What a suite may do to the app before it initializes (body parsers, Fastify plugins, pipes). */
export interface AppSetup {
  express?: (app: NestExpressApplication) => void | Promise<void>;
  fastify?: (app: NestFastifyApplication) => void | Promise<void>;
  any?: (app: INestApplication) => void | Promise<void>;
}

/** Like createTestApp, but lets the suite configure the app before `init()`; listens on 127.0.0.1. */
export async function startConfiguredApp(config: {
  adapter: AdapterName;
  controllers: Type<unknown>[];
  providers?: ModuleMetadata['providers'];
  options?: Partial<IdempotencyModuleOptions>;
  setup?: AppSetup;
  /** Receives the app's log (the module's startup warnings included); silent by default. */
  logger?: LoggerService;
}): Promise<ConfiguredApp> {
  const logger = config.logger ?? false;
  const schema = uniqueSchema('in');
  const builder = Test.createTestingModule({
    imports: [
      IdempotencyModule.forRoot({
        postgres: { url: databaseUrl(), schema },
        redis: { url: redisUrl(), keyPrefix: `idem-${schema}` },
        migrationsRun: true,
        ...config.options,
      }),
    ],
    controllers: config.controllers,
    providers: config.providers ?? [],
  });
  // As NestFactory.create(AppModule, { logger }): the logger also receives what providers log while they are made.
  const moduleRef = await (config.logger ? builder.setLogger(config.logger) : builder).compile();
  let app: INestApplication;
  if (config.adapter === 'fastify') {
    const fastify = moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter(), { logger });
    await config.setup?.fastify?.(fastify);
    app = fastify;
  } else {
    const express = moduleRef.createNestApplication<NestExpressApplication>({ logger });
    await config.setup?.express?.(express);
    app = express;
  }
  await config.setup?.any?.(app);
  await app.init();
  const url = await listen(app);
  return {
    app,
    url,
    schema,
    close: async () => {
      await app.close();
      await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    },
  };
}
