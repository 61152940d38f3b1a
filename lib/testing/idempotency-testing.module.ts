import { DynamicModule, Module, Provider } from '@nestjs/common';
import { MODULE_METADATA } from '@nestjs/common/constants';
import { DiscoveryModule } from '@nestjs/core';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import { IdempotencyModule } from '../idempotency.module';
import { idempotencyProviders } from '../idempotency.providers';
import { InboxService } from '../inbox/inbox.service';
import { RetentionService } from '../retention/retention.service';
import { OutboxRelay } from '../outbox/outbox-relay';
import { OutboxService } from '../outbox/outbox.service';
import { TestModeOutboxService } from '../outbox/test-mode-outbox.service';
import { IdempotencyCache } from '../storage/idempotency.cache';
import { IdempotencyConnections } from '../storage/idempotency-connections';
import { IdempotencyStore } from '../storage/idempotency.store';
import { MemoryIdempotencyCache } from '../storage/memory/memory-idempotency.cache';
import { MemoryIdempotencyStore } from '../storage/memory/memory-idempotency.store';
import { MemoryWorkflowStore } from '../workflow/storage/memory-workflow.store';
import { WorkflowStore } from '../workflow/storage/workflow.store';
import { WorkflowOrchestrator } from '../workflow/workflow.orchestrator';
import { WorkflowQueues } from '../workflow/workflow-queues';
import { WorkflowReconciler } from '../workflow/workflow.reconciler';
import { WorkflowStartCache } from '../workflow/workflow-start.cache';
import { WorkflowWorker } from '../workflow/workflow-worker';
import { IdempotencyTestingOptions, resolveTestingOptions } from './idempotency-testing-options';
import { InlineWorkflowQueues } from './inline-workflow-queues';
import { InlineWorkflowRunner } from './inline-workflow-runner';
import { MemoryInboxService } from './memory-inbox.service';
import { MemoryRetentionService } from './memory-retention.service';
import { NoWorkflowStartCache } from './no-workflow-start.cache';
import { IdempotencyTransactions } from '../transaction/idempotency-transactions';
import { TransactionalSteps } from '../transaction/transactional-steps';
import { TransactionalRoutesCheck } from './transactional-routes.check';
import { ClsTransactionBridge } from '../transaction/cls/cls-transaction-bridge';
import { useLibraryLogLevel } from '../observability/library-logger';

/**
 * The providers of IdempotencyModule that talk to Postgres, Redis or BullMQ (or start workers and timers): the
 * testing module replaces them with in-memory ones or leaves them out. Everything else is IdempotencyModule's own
 * list, so whatever it gains (interceptor, guard, workflow engine) the testing module has too.
 */
const REPLACED: readonly unknown[] = [
  RESOLVED_IDEMPOTENCY_OPTIONS, IdempotencyConnections, IdempotencyStore, IdempotencyCache, InboxService, RetentionService,
  WorkflowStore, WorkflowQueues, WorkflowStartCache, WorkflowWorker, WorkflowReconciler, WorkflowOrchestrator,
  // No database: `transaction: true` is refused at startup (these are injected as optional).
  IdempotencyTransactions, TransactionalSteps, ClsTransactionBridge,
  OutboxService, OutboxRelay,
];

function tokenOf(provider: Provider): unknown {
  return typeof provider === 'function' ? provider : provider.provide;
}

/**
 * `IdempotencyModule` for unit tests: the same interceptor, method guard, `IdempotencyService` and workflow engine
 * over in-memory stores with the Postgres and Redis stores' rules (claim, lease, compare-and-set completion, replay,
 * mismatch, TTL, reuse after failure). No Postgres, no Redis, and none of pg, typeorm, ioredis or bullmq is loaded.
 * Workflows run in process: `WorkflowClient.start()` runs steps through the library's executor and step worker with
 * checkpoints in memory, and `handle.result()` waits for them. Every module that imports it gets a fresh state.
 */
@Module({})
export class IdempotencyTestingModule {
  /** The testing module, global like `IdempotencyModule.forRoot()`, with the same injectable services. */
  static forRoot(options: IdempotencyTestingOptions = {}): DynamicModule {
    const providers: Provider[] = [
      ...idempotencyProviders.filter((provider) => !REPLACED.includes(tokenOf(provider))),
      {
        provide: RESOLVED_IDEMPOTENCY_OPTIONS,
        useFactory: () => {
          const resolved = resolveTestingOptions(options);
          useLibraryLogLevel(resolved.logLevel);
          return resolved;
        },
      },
      { provide: IdempotencyStore, useClass: MemoryIdempotencyStore },
      { provide: IdempotencyCache, useClass: MemoryIdempotencyCache },
      { provide: InboxService, useClass: MemoryInboxService },
      { provide: RetentionService, useClass: MemoryRetentionService },
      { provide: OutboxService, useClass: TestModeOutboxService },
      { provide: WorkflowStore, useClass: MemoryWorkflowStore },
      { provide: WorkflowQueues, useClass: InlineWorkflowQueues },
      { provide: WorkflowStartCache, useFactory: () => new NoWorkflowStartCache() },
      InlineWorkflowRunner,
      TransactionalRoutesCheck,
    ];
    const exported = (Reflect.getMetadata(MODULE_METADATA.EXPORTS, IdempotencyModule) ?? []) as NonNullable<DynamicModule['exports']>;
    return {
      module: IdempotencyTestingModule,
      global: true,
      imports: [DiscoveryModule],
      providers,
      exports: [...exported, IdempotencyStore, IdempotencyCache, WorkflowStore],
    };
  }
}
