import { DynamicModule, Module, Provider } from '@nestjs/common';
import { APP_FILTER, APP_INTERCEPTOR, DiscoveryModule } from '@nestjs/core';
import { IdempotencyService } from '../core/idempotency.service';
import { IdempotentMethodExplorer } from '../guard/idempotent-method.explorer';
import { IdempotencyProblemFilter } from '../http/idempotency-problem.filter';
import { IdempotencyInterceptor } from '../http/idempotency.interceptor';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import { IdempotencyMetadataAccessor } from '../idempotency-metadata.accessor';
import { InboxService } from '../inbox/inbox.service';
import { RetentionService } from '../retention/retention.service';
import { WorkflowRetentionPolicy } from '../retention/workflow-retention.policy';
import { IdempotencyCache } from '../storage/idempotency.cache';
import { IdempotencyStore } from '../storage/idempotency.store';
import { MemoryIdempotencyCache } from '../storage/memory/memory-idempotency.cache';
import { MemoryIdempotencyStore } from '../storage/memory/memory-idempotency.store';
import { StepContextAccessor } from '../workflow/step-context';
import { StepWorker } from '../workflow/step-worker';
import { MemoryWorkflowStore } from '../workflow/storage/memory-workflow.store';
import { WorkflowStore } from '../workflow/storage/workflow.store';
import { WorkflowClient } from '../workflow/workflow.client';
import { WorkflowExecutor } from '../workflow/workflow.executor';
import { WorkflowExplorer } from '../workflow/workflow.explorer';
import { WorkflowMetadataAccessor } from '../workflow/workflow-metadata.accessor';
import { WorkflowQueues } from '../workflow/workflow-queues';
import { WorkflowRegistry } from '../workflow/workflow.registry';
import { RegisteredWorkflowRetention } from '../workflow/workflow-retention';
import { WorkflowStartCache } from '../workflow/workflow-start.cache';
import { IdempotencyTestingOptions, resolveTestingOptions } from './idempotency-testing-options';
import { InlineWorkflowQueues } from './inline-workflow-queues';
import { InlineWorkflowRunner } from './inline-workflow-runner';
import { MemoryInboxService } from './memory-inbox.service';
import { MemoryRetentionService } from './memory-retention.service';
import { NoWorkflowStartCache } from './no-workflow-start.cache';

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
      { provide: RESOLVED_IDEMPOTENCY_OPTIONS, useFactory: () => resolveTestingOptions(options) },
      { provide: IdempotencyStore, useClass: MemoryIdempotencyStore },
      { provide: IdempotencyCache, useClass: MemoryIdempotencyCache },
      IdempotencyService,
      IdempotencyMetadataAccessor,
      IdempotentMethodExplorer,
      { provide: InboxService, useClass: MemoryInboxService },
      { provide: RetentionService, useClass: MemoryRetentionService },
      { provide: APP_INTERCEPTOR, useClass: IdempotencyInterceptor },
      { provide: APP_FILTER, useClass: IdempotencyProblemFilter },
      WorkflowMetadataAccessor,
      WorkflowRegistry,
      { provide: WorkflowStore, useClass: MemoryWorkflowStore },
      { provide: WorkflowQueues, useClass: InlineWorkflowQueues },
      { provide: WorkflowStartCache, useFactory: () => new NoWorkflowStartCache() },
      RegisteredWorkflowRetention,
      { provide: WorkflowRetentionPolicy, useExisting: RegisteredWorkflowRetention },
      StepWorker,
      WorkflowExecutor,
      WorkflowExplorer,
      InlineWorkflowRunner,
      WorkflowClient,
      StepContextAccessor,
    ];
    return {
      module: IdempotencyTestingModule,
      global: true,
      imports: [DiscoveryModule],
      providers,
      exports: [
        IdempotencyService, InboxService, RetentionService, WorkflowClient, StepContextAccessor,
        IdempotencyStore, IdempotencyCache, WorkflowStore,
      ],
    };
  }
}
