import { Body, Controller, Get, Headers, HttpCode, Logger, Param, Post, Res } from '@nestjs/common';
import { Idempotent } from '../../lib';
import { parseCreatePayment } from './create-payment.dto';
import type { Payment } from './payment';
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
  constructor(private readonly payments: PaymentsService) {}

  @Post()
  @HttpCode(201)
  // transaction: the ledger row and the stored response commit together (exactly one charge per key, crashes included)
  @Idempotent({ required: true, transaction: true })
  async create(@Body() body: unknown, @Res({ passthrough: true }) res: HeaderWriter, @Headers('x-demo-pause') pause?: string): Promise<Payment> {
    const payment = await this.payments.charge(parseCreatePayment(body));
    await demoPauseAfterWrite(payment, pause);
    res.setHeader('Location', `/payments/${payment.id}`);
    return payment;
  }

  @Get('ledger/count')
  async count(): Promise<{ count: number }> {
    return { count: await this.payments.count() };
  }

  @Get(':id')
  get(@Param('id') id: string): Promise<Payment> {
    return this.payments.get(id);
  }
}
