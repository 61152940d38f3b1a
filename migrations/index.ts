import { CreateIdempotencyRecords1732250000000 } from './1732250000000-create-idempotency-records';
import { CreateInboxMessages1732255000000 } from './1732255000000-create-inbox-messages';
import { CreateWorkflowTables1732260000000 } from './1732260000000-create-workflow-tables';
import { AddWorkflowResultWaiters1764000200000 } from './1764000200000-add-workflow-result-waiters';

/** The library's TypeORM migrations, in order. Add them to your DataSource's `migrations`, or set `migrationsRun: true`. */
export const IDEMPOTENCY_MIGRATIONS = [
  CreateIdempotencyRecords1732250000000,
  CreateInboxMessages1732255000000,
  CreateWorkflowTables1732260000000,
  AddWorkflowResultWaiters1764000200000,
];

/** The migrations table the module uses when it applies or verifies its own migrations. */
export const IDEMPOTENCY_MIGRATIONS_TABLE = 'idempotency_migrations';
