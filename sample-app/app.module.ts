import { Module } from '@nestjs/common';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { IdempotencyModule } from '../lib';
import { AuthModule } from './auth/auth.module';
import { idempotencyOptionsFromEnv } from './config/idempotency-options.factory';
import { DatabaseModule } from './database/database.module';
import { NotificationsModule } from './notifications/notifications.module';
import { OrdersModule } from './orders/orders.module';
import { ReconciliationModule } from './reconciliation/reconciliation.module';
import { PaymentsModule } from './payments/payments.module';
import { WebhooksModule } from './webhooks/webhooks.module';
import { OperationsModule } from './operations/operations.module';
import { ConsoleDemoGuard } from './auth/console-demo.guard';

@Module({
  imports: [
    ConfigModule.forRoot({ isGlobal: true }),
    IdempotencyModule.forRootAsync({
      imports: [ConfigModule],
      inject: [ConfigService],
      // The console at /_idempotency, behind the demo guard (any API client's bearer token).
      useFactory: (config: ConfigService) => ({ ...idempotencyOptionsFromEnv(config), console: { path: '/_idempotency', guard: ConsoleDemoGuard } }),
    }),
    // Every route needs a bearer token (unless @Public()); the Idempotency-Key scope is the authenticated client.
    AuthModule,
    DatabaseModule,
    PaymentsModule,
    WebhooksModule,
    // Consumes payment.created, which every charge publishes through the outbox.
    NotificationsModule,
    OperationsModule,
    // Durable workflows run on BullMQ: the orders part needs Redis.
    ...(process.env.REDIS_URL ? [OrdersModule, ReconciliationModule] : []),
  ],
})
export class AppModule {}
