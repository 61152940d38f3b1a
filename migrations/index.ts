import { CreateIdempotencyRecords1732250000000 } from './1732250000000-create-idempotency-records';
import { CreateInboxMessages1732255000000 } from './1732255000000-create-inbox-messages';
import { CreateWorkflowTables1732260000000 } from './1732260000000-create-workflow-tables';
import { StepJournal1764000100000 } from './1764000100000-step-journal';
import { AddWorkflowResultWaiters1764000200000 } from './1764000200000-add-workflow-result-waiters';
import { CreateIdempotencyLocks1764000500000 } from './1764000500000-create-idempotency-locks';
import { CreateOutboxMessages1764000800000 } from './1764000800000-create-outbox-messages';
import { WorkflowWaits1764001400000 } from './1764001400000-workflow-waits';
import { WorkflowWaitCalls1764001400100 } from './1764001400100-workflow-wait-calls';
import { AddOutboxUnkeyedIndex1764001500000 } from './1764001500000-add-outbox-unkeyed-index';
import { TaskExecutions1764001700000 } from './1764001700000-task-executions';
import { CreateSchedules1764001800000 } from './1764001800000-create-schedules';
import { IndexFailedRecords1764001900000 } from './1764001900000-index-failed-records';
import { skipWhenRecorded } from './recorded-migrations';

/** The library's migrations as written, in order (the module and the CLI apply these). */
export const IDEMPOTENCY_MIGRATION_CLASSES = [
  CreateIdempotencyRecords1732250000000,
  CreateInboxMessages1732255000000,
  CreateWorkflowTables1732260000000,
  StepJournal1764000100000,
  AddWorkflowResultWaiters1764000200000,
  CreateIdempotencyLocks1764000500000,
  CreateOutboxMessages1764000800000,
  WorkflowWaits1764001400000,
  WorkflowWaitCalls1764001400100,
  AddOutboxUnkeyedIndex1764001500000,
  TaskExecutions1764001700000,
  CreateSchedules1764001800000,
  IndexFailedRecords1764001900000,
];

/**
 * The library's TypeORM migrations, in order. Add them to your DataSource's `migrations`, set `migrationsRun: true`,
 * or run `npx nestjs-idempotency migrate`. Each is skipped (only recorded) when a migrations table in its schema
 * already lists it, so the three ways can be mixed.
 */
export const IDEMPOTENCY_MIGRATIONS = IDEMPOTENCY_MIGRATION_CLASSES.map(skipWhenRecorded);

/** The migrations table the module and the CLI use when they apply or verify the library's migrations. */
export const IDEMPOTENCY_MIGRATIONS_TABLE = 'idempotency_migrations';
