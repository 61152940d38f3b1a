import { Module, OnModuleInit } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { IdempotencyService } from './core/idempotency.service';
import { IdempotencyInterceptor } from './http/idempotency.interceptor';
import { IdempotencyMetadataAccessor } from './idempotency-metadata.accessor';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from './idempotency.constants';
import { InboxService } from './inbox/inbox.service';
import { OutboxService } from './outbox/outbox.service';
import { RetentionService } from './retention/retention.service';
import { IdempotencyConfigurableModule } from './idempotency.module-definition';
import { idempotencyProviders } from './idempotency.providers';
import { IdempotencyConnections } from './storage/idempotency-connections';
import { workflowExports } from './workflow/workflow.providers';
import { taskExports } from './task/task.providers';
import { observabilityExports } from './observability/observability.providers';

/**
 * Registers the global `Idempotency-Key` interceptor and the `IdempotencyService` engine.
 * Use `IdempotencyModule.forRoot(options)` or `IdempotencyModule.forRootAsync({ imports, inject, useFactory })`.
 */
@Module({
  imports: [DiscoveryModule],
  providers: idempotencyProviders,
  // The interceptor and what it injects, so that an app can apply it itself (`http.global: false`).
  exports: [
    IdempotencyService, InboxService, OutboxService, RetentionService, IdempotencyInterceptor, IdempotencyMetadataAccessor, RESOLVED_IDEMPOTENCY_OPTIONS,
    ...workflowExports,
    ...taskExports,
    ...observabilityExports,
  ],
})
export class IdempotencyModule extends IdempotencyConfigurableModule implements OnModuleInit {
  constructor(private readonly connections: IdempotencyConnections) {
    super();
  }

  /**
   * Nest calls a module's own onModuleInit after those of all its providers, and not at all when one of them
   * failed: the connections open only for a startup that every provider of the module accepted.
   */
  async onModuleInit(): Promise<void> {
    await this.connections.open();
  }
}
