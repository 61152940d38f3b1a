import { NestInterceptor, Provider } from '@nestjs/common';
import { LibraryLogger, useLibraryLogLevel } from './observability/library-logger';
import { APP_FILTER, APP_INTERCEPTOR } from '@nestjs/core';
import { IdempotencyService } from './core/idempotency.service';
import { IdempotentMethodExplorer } from './guard/idempotent-method.explorer';
import { InboxService } from './inbox/inbox.service';
import { RetentionService } from './retention/retention.service';
import { IdempotencyMetadataAccessor } from './idempotency-metadata.accessor';
import { IdempotencyInterceptor } from './http/idempotency.interceptor';
import { IdempotencyProblemFilter } from './http/idempotency-problem.filter';
import { RouteHandlerTracker } from './http/route-handler-tracker';
import { ScopeWarning } from './http/scope-warning';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from './idempotency.constants';
import { IDEMPOTENCY_MODULE_OPTIONS } from './idempotency.module-definition';
import type { IdempotencyModuleOptions } from './interfaces/idempotency-options.interface';
import type { ResolvedOptions } from './interfaces/resolved-options';
import { IdempotencyCache, NoCache } from './storage/idempotency.cache';
import { IdempotencyConnections } from './storage/idempotency-connections';
import { IdempotencyStore } from './storage/idempotency.store';
import { PostgresIdempotencyStore } from './storage/postgres/postgres-idempotency.store';
import { CircuitBreaker } from './storage/redis/circuit-breaker';
import { RedisIdempotencyCache } from './storage/redis/redis-idempotency.cache';
import { IdempotencyTransactions } from './transaction/idempotency-transactions';
import { PostgresTransactions } from './transaction/postgres-transactions';
import { TransactionalSteps } from './transaction/transactional-steps';
import { ClsTransactionBridge } from './transaction/cls/cls-transaction-bridge';
import { resolveOptions } from './utils/validate-options';
import { workflowProviders } from './workflow/workflow.providers';
import { taskProviders } from './task/task.providers';
import { queueProviders } from './queues/queue.providers';
import { scheduleProviders } from './schedule/schedule.providers';
import { outboxProviders } from './outbox/outbox.providers';
import { IdempotencyObserver } from './observability/idempotency-observer';
import { observabilityProviders } from './observability/observability.providers';
import { observeIdempotencyCache, observeIdempotencyStore } from './observability/observed-stores';

/** The module's providers: options, connections, the default Postgres store and Redis cache, the engine and the interceptor. */
export const idempotencyProviders: Provider[] = [
  {
    provide: RESOLVED_IDEMPOTENCY_OPTIONS,
    useFactory: (options: IdempotencyModuleOptions) => {
      const resolved = resolveOptions(options);
      useLibraryLogLevel(resolved.logLevel); // first thing the module makes: set before any of its providers logs
      return resolved;
    },
    inject: [IDEMPOTENCY_MODULE_OPTIONS],
  },
  IdempotencyConnections,
  {
    provide: IdempotencyStore,
    useFactory: (connections: IdempotencyConnections, observer: IdempotencyObserver) => observeIdempotencyStore(new PostgresIdempotencyStore(connections), observer),
    inject: [IdempotencyConnections, IdempotencyObserver],
  },
  {
    provide: IdempotencyCache,
    useFactory: (options: ResolvedOptions, connections: IdempotencyConnections, observer: IdempotencyObserver) => {
      if (!options.redis) return new NoCache();
      const breaker = new CircuitBreaker('Redis', {
        failureThreshold: options.redis.failureThreshold,
        resetAfterMs: options.redis.resetAfterMs,
        timeoutMs: options.redis.commandTimeoutMs,
      }, new LibraryLogger('Idempotency'));
      observer.watchBreaker('redis', breaker);
      return observeIdempotencyCache(new RedisIdempotencyCache(connections, breaker), observer);
    },
    inject: [RESOLVED_IDEMPOTENCY_OPTIONS, IdempotencyConnections, IdempotencyObserver],
  },
  {
    provide: IdempotencyTransactions,
    useFactory: (connections: IdempotencyConnections) => new PostgresTransactions(connections),
    inject: [IdempotencyConnections],
  },
  {
    provide: TransactionalSteps,
    useFactory: (transactions: IdempotencyTransactions, connections: IdempotencyConnections, options: ResolvedOptions) =>
      new TransactionalSteps(transactions, connections, options.workflows.lockDurationMs),
    inject: [IdempotencyTransactions, IdempotencyConnections, RESOLVED_IDEMPOTENCY_OPTIONS],
  },
  ClsTransactionBridge,
  IdempotencyService,
  IdempotencyMetadataAccessor,
  IdempotentMethodExplorer,
  InboxService,
  RetentionService,
  RouteHandlerTracker,
  ScopeWarning,
  IdempotencyInterceptor,
  {
    // With `http.global: false` the app applies the interceptor itself, and with `http.enabled: false` nothing acts:
    // the app-wide slot is then left empty (Nest skips a null enhancer), so routes pay for no interceptor at all.
    provide: APP_INTERCEPTOR,
    useFactory: (options: ResolvedOptions, interceptor: IdempotencyInterceptor): NestInterceptor | null =>
      (options.http.global && options.http.enabled ? interceptor : null),
    inject: [RESOLVED_IDEMPOTENCY_OPTIONS, IdempotencyInterceptor],
  },
  { provide: APP_FILTER, useClass: IdempotencyProblemFilter },
  ...queueProviders,
  ...workflowProviders,
  ...taskProviders,
  ...scheduleProviders,
  ...outboxProviders,
  ...observabilityProviders,
];
