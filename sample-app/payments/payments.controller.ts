import { Body, Controller, Get, Headers, HttpCode, Logger, NotFoundException, Optional, Param, Post, Res } from '@nestjs/common';
import { Idempotent } from '../../lib';
import { parseCreatePayment } from './create-payment.dto';
import type { Payment } from './payment';
import { PaymentReceipts } from './payment-receipts';
import { PaymentsService } from './payments.service';

/**
 * For `npm run demo` only: with SAMPLE_DEMO_HOOKS=1, a charge sent with `X-Demo-Pause: 1` logs that its ledger row is
 * written and then waits with its transaction open, so the demo can kill the app with SIGKILL before the commit.
 * The header is not part of the request fingerprint: the retry without it is the same request.
 */
async function demoPauseAfterWrite(payment: Payment, pause: string | undefined): Promise<void> {
  if (process.env.SAMPLE_DEMO_HOOKS !== '1' || pause !== '1') return;
  new Logger('Payments').log(`ledger row ${payment.id} written, transaction still open (demo pause)`);
  await new Promise((resolve) => setTimeout(resolve, 60_000));
}

/** The part of Express's response the controller uses (the app runs on @nestjs/platform-express). */
interface HeaderWriter {
  setHeader(name: string, value: string): unknown;
}

@Controller('payments')
export class PaymentsController {
  constructor(
    private readonly payments: PaymentsService,
    @Optional() private readonly receipts?: PaymentReceipts,
  ) {}

  @Post()
  @HttpCode(201)
  // transaction: the ledger row and the stored response commit together (exactly one charge per key, crashes included)
  @Idempotent({ required: true, transaction: true })
  async create(@Body() body: unknown, @Res({ passthrough: true }) res: HeaderWriter, @Headers('x-demo-pause') pause?: string): Promise<Payment> {
    const payment = await this.payments.charge(parseCreatePayment(body));
    await demoPauseAfterWrite(payment, pause);
    // One receipt per payment: task id receipt-<payment id>, enqueued by the run that charged (a replay does not run this).
    await this.receipts?.request(payment.id);
    res.setHeader('Location', `/payments/${payment.id}`);
    return payment;
  }

  @Get('ledger/count')
  async count(): Promise<{ count: number }> {
    return { count: await this.payments.count() };
  }

  /**
   * Asks for a payment's receipt again: the same task id returns the task that already sent it, with its stored result
   * (no second receipt). Needs Redis (404 without).
   */
  @Post(':id/receipt')
  async receipt(@Param('id') id: string): Promise<{ taskId: string; executionId: string; status: string; receipt: unknown; sends: number }> {
    if (!this.receipts) throw new NotFoundException('receipts need Redis: start the app with REDIS_URL');
    await this.payments.get(id);
    const handle = await this.receipts.request(id);
    const receipt = await handle.result({ timeout: '10s' });
    return { taskId: handle.taskId, executionId: handle.executionId, status: await handle.status(), receipt, sends: this.receipts.sends(id) };
  }

  @Get(':id')
  get(@Param('id') id: string): Promise<Payment> {
    return this.payments.get(id);
  }
}
