import { Module } from '@nestjs/common';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { IdempotencyModule, IdempotencyModuleOptions } from '../lib';
import { DatabaseModule } from './database/database.module';
import { PaymentsModule } from './payments/payments.module';
import { WebhooksModule } from './webhooks/webhooks.module';

@Module({
  imports: [
    ConfigModule.forRoot({ isGlobal: true }),
    IdempotencyModule.forRootAsync({
      imports: [ConfigModule],
      inject: [ConfigService],
      useFactory: (config: ConfigService): IdempotencyModuleOptions => {
        const redisUrl = config.get<string>('REDIS_URL');
        return {
          postgres: { url: config.getOrThrow<string>('DATABASE_URL') },
          redis: redisUrl ? { url: redisUrl } : false,
          migrationsRun: true,
          http: { ttl: '24h', lockTimeout: '30s' },
        };
      },
    }),
    DatabaseModule,
    PaymentsModule,
    WebhooksModule,
  ],
})
export class AppModule {}
