export { IdempotencyModule } from './idempotency.module';
export { IDEMPOTENCY_MODULE_OPTIONS } from './idempotency.module-definition';
export { IdempotencyService } from './core/idempotency.service';
export type { BeginResult } from './core/idempotency.service';
export type { Claim, ClaimRequest, ClaimOutcome, CompletedRecord, RecordStatus } from './core/idempotency-record';
export { Idempotent, SkipIdempotency } from './http/idempotent.decorator';
export { IdempotentMethod } from './guard/idempotent-method.decorator';
export { InboxService } from './inbox/inbox.service';
export { RetentionService } from './retention/retention.service';
/** The transactional outbox: `publish(manager, message)` in your transaction, `stats()`, `messages()`, `retry(id)`, `skip(id)`. */
export { OutboxService } from './outbox/outbox.service';
/** Marks a provider method as the delivery target of an outbox topic configured `{ to: 'handler' }`. */
export { OutboxHandler } from './outbox/outbox-handler.decorator';
export type {
  OutboxMessage, OutboxDelivery, OutboxOptions, OutboxTopicTarget, OutboxRelayOptions, OutboxBackoffOptions, OutboxStats, OutboxCounts,
  OutboxMessageInfo, OutboxMessageStatus,
} from './outbox/outbox.interfaces';
export { OutboxTopicUnknownError } from './errors/outbox-topic-unknown.error';
export { OutboxNotInTransactionError } from './errors/outbox-not-in-transaction.error';
export { OutboxMessageInvalidError } from './errors/outbox-message-invalid.error';
export { OutboxMessageNotFoundError } from './errors/outbox-message-not-found.error';
export { OutboxDeliveryTimeoutError } from './errors/outbox-delivery-timeout.error';
export type { RetentionOptions, CleanupReport } from './retention/retention.interfaces';
export type { InboxOutcome, InboxBatchOutcome } from './inbox/inbox.service';
export type { IdempotentMethodOptions } from './guard/idempotent-method.decorator';
export type { RunOptions, OnDuplicate, OnFailure } from './interfaces/run-options.interface';
export { currentTransaction } from './transaction/current-transaction';
/** Isolation levels of the transactional mode (`transaction: true`). */
export type { TransactionIsolation } from './transaction/transaction-options';
export { NotInTransactionError } from './errors/not-in-transaction.error';
export { LeaseLostError } from './errors/lease-lost.error';
export { TransactionAbortedError } from './errors/transaction-aborted.error';
export { IdempotencyInterceptor } from './http/idempotency.interceptor';
/** A `@nestjs/terminus` health indicator: Postgres reachable, schema current, Redis reachable or bypassed (degraded), workers alive. */
export { IdempotencyHealthIndicator } from './health/idempotency-health.indicator';
export type { IdempotencyHealth, IdempotencyHealthOptions } from './health/idempotency-health.indicator';
/** The hook the engine reports to for metrics and traces (its OpenTelemetry implementation is bound by the module). */
export { IdempotencyObserver } from './observability/idempotency-observer';
export type {
  IdempotencyFace, ClaimOutcomeName, StoreName, TraceCarrier, StepAttemptInfo, GaugeSource,
} from './observability/idempotency-observer';
/** The console's operations as an injectable API: list/show/cancel/resume workflow executions, show/release keys. */
export { IdempotencyConsole } from './console/idempotency-console.service';
export type { ConsoleWorkflowFilter, ConsoleExecution } from './console/idempotency-console.service';
/** An execution's events, messages and durable waits, as `IdempotencyConsole.showWorkflow` returns them. */
export type { ExecutionActivity } from './workflow/storage/workflow.store';
export type { KeyRecord } from './console/key-records';
/** The values of the `logLevel` module option (the least severe line the library logs; `false`: none). */
export type { IdempotencyLogLevel } from './observability/library-logger';
/** Options of `console` (the web console, off by default). */
export type { ConsoleOptions } from './console/console-options';
/** Options of `observability` (metrics and traces through `@opentelemetry/api`). */
export type { ObservabilityOptions } from './observability/observability-options';
export { IdempotencyProblemException, PROBLEM_CONTENT_TYPE, DEFAULT_PROBLEM_TYPE_BASE, IDEMPOTENCY_PROBLEMS } from './http/problem-details';
export type { ProblemDetails, IdempotencyProblemType } from './http/problem-details';
export { IdempotencyStore } from './storage/idempotency.store';
export { IdempotencyCache } from './storage/idempotency.cache';
export type { CacheLookup } from './storage/idempotency.cache';
export { IdempotencyError } from './errors/idempotency.error';
export { IdempotencyConfigError } from './errors/idempotency-config.error';
export { IdempotencySchemaError } from './errors/idempotency-schema.error';
export { StoreUnavailableError } from './errors/store-unavailable.error';
export { StoreRejectedError } from './errors/store-rejected.error';
export { IdempotencyInputTooLongError } from './errors/idempotency-input-too-long.error';
export { BodyNotFingerprintableError } from './errors/body-not-fingerprintable.error';
export { MAX_KEY_BYTES, MAX_SCOPE_BYTES } from './core/claim-limits';
export { DuplicateExecutionError } from './errors/duplicate-execution.error';
export { IdempotencyKeyReusedError } from './errors/idempotency-key-reused.error';
export { StoredFailureError } from './errors/stored-failure.error';
export { ResultNotStoredError } from './errors/result-not-stored.error';
export { KeyDerivationError } from './errors/key-derivation.error';
export { IDEMPOTENCY_MIGRATIONS, IDEMPOTENCY_MIGRATIONS_TABLE } from '../migrations';
export type {
  IdempotencyModuleOptions, HttpIdempotencyOptions, IdempotentRouteOptions, PostgresOptions, PostgresCommonOptions, RedisModuleOptions,
  RedisCommonOptions, RedisBreakerOptions, RedisClusterOptions, IdempotencyRequest,
} from './interfaces/idempotency-options.interface';
export type { Duration } from './utils/duration';
export { Workflow } from './workflow/workflow.decorator';
export { Step } from './workflow/step.decorator';
export { WorkflowClient } from './workflow/workflow.client';
/** `@Scheduled(cron, { timezone?, catchUp? })`: runs a workflow or a `@Task()` method on a cron schedule, each occurrence once (`<name>@<time ISO>`). */
export { Scheduled } from './schedule/scheduled.decorator';
/** Types of schedules: catch-up policy, decorator and `WorkflowClient.schedule()` options, the scheduled run's input, a schedule's info. */
export type { CatchUp, ScheduleOptions, ScheduleWorkflowOptions, ScheduledInput, ScheduleInfo, OccurrenceStarter } from './schedule/schedule.interfaces';
/** Runs schedules of any kind; `addKind(kind, start)` lets another kind of job (e.g. tasks) be scheduled. */
export { ScheduleRegistrar } from './schedule/schedule-registrar';
/** Raised by `WorkflowClient.schedule()` for an invalid cron expression, time zone or option. */
export { ScheduleInvalidError } from './errors/schedule-invalid.error';
/** The per-queue settings (`queues` option) any worker creator applies: `for(queue, defaultConcurrency)`. */
export { QueueSettings } from './queues/queue-settings';
/** Types of the `queues` option and of what `QueueSettings.for()` returns. */
export type { QueueOptions } from './queues/queue-options.interfaces';
export type { QueueRuntimeSettings } from './queues/queue-settings';
export type { WorkflowClass, SendOptions, GetEventOptions } from './workflow/workflow.client';
/** Durable calls of a workflow's run(): sleep, receive messages, publish events, start and await child workflows. */
export { sleep, recv, setEvent, startChild, runChild } from './workflow/workflow-calls';
export type { RecvOptions, StartChildOptions, ChildWorkflowHandle } from './workflow/workflow-calls';
export { WorkflowHandle } from './workflow/workflow-handle';
export type { ResultOptions } from './workflow/workflow-handle';
export { currentStep, StepContextAccessor, NotInStepError } from './workflow/step-context';
export { WorkflowStore } from './workflow/storage/workflow.store';
export type {
  WorkflowOptions, StepOptions, StepBackoff, WorkflowIdentity, WorkflowStatus, StartWorkflowOptions, ListWorkflowsOptions,
  WorkflowExecution, StepCheckpoint, StepContext,
} from './workflow/workflow.interfaces';
export type { WorkflowModuleOptions } from './interfaces/idempotency-options.interface';
export { WorkflowError } from './errors/workflow.error';
export { WorkflowDefinitionError } from './errors/workflow-definition.error';
export { WorkflowConflictError } from './errors/workflow-conflict.error';
export { WorkflowExistsError } from './errors/workflow-exists.error';
export { MissingWorkflowIdError } from './errors/missing-workflow-id.error';
export { DeterminismError, type DeterminismMismatch } from './errors/determinism.error';
export { WorkflowTimeoutError } from './errors/workflow-timeout.error';
export { WorkflowCancelledError } from './errors/workflow-cancelled.error';
export { WorkflowFailedError } from './errors/workflow-failed.error';
export { RecoveryAttemptsExhaustedError } from './errors/recovery-attempts-exhausted.error';
export type { StoredError } from './errors/workflow-failed.error';
export { StepFailedError } from './errors/step-failed.error';
/** Idempotent background tasks: `@Task()` on a provider method, enqueued with `TaskClient` (README "Tasks"). */
export { Task } from './task/task.decorator';
export { TaskClient } from './task/task.client';
export type { TaskMethod } from './task/task.client';
export { TaskHandle } from './task/task-handle';
export type { TaskOptions, EnqueueTaskOptions, ListTasksOptions } from './task/task.interfaces';
export type { ExecutionKind } from './workflow/workflow.interfaces';
export { TaskExistsError } from './errors/task-exists.error';
export { TaskConflictError } from './errors/task-conflict.error';
export { MissingTaskIdError } from './errors/missing-task-id.error';
export { TaskNotFoundError } from './errors/task-not-found.error';
export { StepTimeoutError } from './errors/step-timeout.error';
export { WorkflowNotFoundError } from './errors/workflow-not-found.error';
export { WorkflowResultTimeoutError } from './errors/workflow-result-timeout.error';
export { NotInWorkflowError } from './errors/not-in-workflow.error';
export { WorkflowFinishedError } from './errors/workflow-finished.error';
export { ChildWorkflowFailedError } from './errors/child-workflow-failed.error';
export { REPLAYED_HEADER, UNPROTECTED_HEADER } from './idempotency.constants';
/** `IdempotencyModule` for unit tests: in-memory stores with the same rules, workflows in process, no Postgres or Redis. */
export { IdempotencyTestingModule } from './testing/idempotency-testing.module';
export type { IdempotencyTestingOptions } from './testing/idempotency-testing-options';
export { NoDatabaseInTestModeError } from './testing/memory-inbox.service';
/** The in-memory stores behind `IdempotencyTestingModule` (get them from the testing module to inspect or `clear()` them). */
export { MemoryIdempotencyStore } from './storage/memory/memory-idempotency.store';
export { MemoryIdempotencyCache } from './storage/memory/memory-idempotency.cache';
export { MemoryWorkflowStore } from './workflow/storage/memory-workflow.store';
