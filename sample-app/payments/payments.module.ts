import { Module } from '@nestjs/common';
import { LedgerRepository } from './ledger.repository';
import { PaymentsController } from './payments.controller';
import { PaymentReceipts } from './payment-receipts';
import { PaymentsService } from './payments.service';

@Module({
  controllers: [PaymentsController],
  // Receipts are @Task()s: they run on BullMQ, so only with Redis.
  providers: [PaymentsService, LedgerRepository, ...(process.env.REDIS_URL ? [PaymentReceipts] : [])],
})
export class PaymentsModule {}
