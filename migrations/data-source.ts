// DataSource for the TypeORM CLI: `npm run migration:run` (reads DATABASE_URL and IDEMPOTENCY_SCHEMA).
import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { IDEMPOTENCY_MIGRATIONS, IDEMPOTENCY_MIGRATIONS_TABLE } from './index';

export default new DataSource({
  type: 'postgres',
  url: process.env.DATABASE_URL,
  schema: process.env.IDEMPOTENCY_SCHEMA ?? 'public',
  migrations: IDEMPOTENCY_MIGRATIONS,
  migrationsTableName: IDEMPOTENCY_MIGRATIONS_TABLE,
});
