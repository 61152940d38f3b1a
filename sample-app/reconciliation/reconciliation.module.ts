import { Module } from '@nestjs/common';
import { DailyReconciliationWorkflow } from './daily-reconciliation.workflow';
import { ReconciliationController } from './reconciliation.controller';
import { ReconciliationRepository } from './reconciliation.repository';

/** The daily ledger reconciliation, a scheduled workflow (needs Redis: registered only when REDIS_URL is set). */
@Module({ controllers: [ReconciliationController], providers: [ReconciliationRepository, DailyReconciliationWorkflow] })
export class ReconciliationModule {}
