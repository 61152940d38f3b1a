import { Module } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { APP_GUARD } from '@nestjs/core';
import { ApiClients } from './api-clients';
import { BearerTokenGuard } from './bearer-token.guard';
import { ConsoleDemoGuard } from './console-demo.guard';

/** Bearer-token authentication for every route (see BearerTokenGuard); the token list comes from SAMPLE_API_TOKENS. */
@Module({
  providers: [
    { provide: ApiClients, inject: [ConfigService], useFactory: (config: ConfigService) => new ApiClients(config.get<string>('SAMPLE_API_TOKENS')) },
    { provide: APP_GUARD, useClass: BearerTokenGuard },
    ConsoleDemoGuard,
  ],
})
export class AuthModule {}
