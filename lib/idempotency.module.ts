import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { IdempotencyService } from './core/idempotency.service';
import { InboxService } from './inbox/inbox.service';
import { RetentionService } from './retention/retention.service';
import { IdempotencyConfigurableModule } from './idempotency.module-definition';
import { idempotencyProviders } from './idempotency.providers';
import { workflowExports } from './workflow/workflow.providers';

/**
 * Registers the global `Idempotency-Key` interceptor and the `IdempotencyService` engine.
 * Use `IdempotencyModule.forRoot(options)` or `IdempotencyModule.forRootAsync({ imports, inject, useFactory })`.
 */
@Module({
  imports: [DiscoveryModule],
  providers: idempotencyProviders,
  exports: [IdempotencyService, InboxService, RetentionService, ...workflowExports],
})
export class IdempotencyModule extends IdempotencyConfigurableModule {}
