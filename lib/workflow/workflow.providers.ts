import type { Provider } from '@nestjs/common';
import { IdempotencyConnections } from '../storage/idempotency-connections';
import { StepContextAccessor } from './step-context';
import { StepWorker } from './step-worker';
import { PostgresWorkflowStore } from './storage/postgres-workflow.store';
import { WorkflowStore } from './storage/workflow.store';
import { WorkflowClient } from './workflow.client';
import { WorkflowExecutor } from './workflow.executor';
import { WorkflowExplorer } from './workflow.explorer';
import { WorkflowMetadataAccessor } from './workflow-metadata.accessor';
import { WorkflowOrchestrator } from './workflow.orchestrator';
import { WorkflowQueues } from './workflow-queues';
import { WorkflowReconciler } from './workflow.reconciler';
import { WorkflowRegistry } from './workflow.registry';
import { WorkflowWorker } from './workflow-worker';
import { WorkflowWaker } from './workflow-waker';
import { DurableCalls } from './durable-calls';
import { WorkflowStartCache } from './workflow-start.cache';
import { RegisteredWorkflowRetention } from './workflow-retention';
import { WorkflowRetentionPolicy } from '../retention/workflow-retention.policy';
import { IdempotencyObserver } from '../observability/idempotency-observer';
import { observeWorkflowStore } from '../observability/observed-stores';

/** The durable-workflow providers: discovery, registry, store, queues, executor, workers, reconciler and client. */
export const workflowProviders: Provider[] = [
  WorkflowMetadataAccessor,
  WorkflowRegistry,
  {
    provide: WorkflowStore,
    useFactory: (connections: IdempotencyConnections, observer: IdempotencyObserver) => observeWorkflowStore(new PostgresWorkflowStore(connections), observer),
    inject: [IdempotencyConnections, IdempotencyObserver],
  },
  WorkflowQueues,
  StepWorker,
  RegisteredWorkflowRetention,
  { provide: WorkflowRetentionPolicy, useExisting: RegisteredWorkflowRetention },
  WorkflowWaker,
  DurableCalls,
  WorkflowExecutor,
  WorkflowWorker,
  WorkflowReconciler,
  WorkflowExplorer,
  WorkflowOrchestrator,
  WorkflowStartCache,
  WorkflowClient,
  StepContextAccessor,
];

/** The workflow providers an application may inject. */
export const workflowExports = [WorkflowClient, StepContextAccessor];
