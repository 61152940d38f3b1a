// Jest setup file: every IdempotencyModule.forRoot() of the suite gets `postgres.preparedStatements: false`,
// the setting an app behind PgBouncer's transaction pooling uses.
import { IdempotencyModule } from '../../lib';
import type { IdempotencyModuleOptions } from '../../lib';

const forRoot = IdempotencyModule.forRoot.bind(IdempotencyModule);
IdempotencyModule.forRoot = (options: IdempotencyModuleOptions) =>
  forRoot({ ...options, postgres: { ...options.postgres, preparedStatements: false } });
