import { Module } from '@nestjs/common';
import { LedgerRepository } from './ledger.repository';
import { PaymentsController } from './payments.controller';
import { PaymentsService } from './payments.service';

@Module({
  controllers: [PaymentsController],
  providers: [PaymentsService, LedgerRepository],
})
export class PaymentsModule {}
