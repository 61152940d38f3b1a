import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { OperationsController } from './operations.controller';

/** Metrics, health; Swagger is set up in main.ts and the console by the `console` option (see app.module.ts). */
@Module({ imports: [TerminusModule.forRoot({ logger: false })], controllers: [OperationsController] })
export class OperationsModule {}
