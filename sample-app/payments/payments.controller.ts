import { Body, Controller, Get, HttpCode, Param, Post, Res } from '@nestjs/common';
import { Idempotent } from '../../lib';
import { parseCreatePayment } from './create-payment.dto';
import type { Payment } from './payment';
import { PaymentsService } from './payments.service';

/** The part of Express's response the controller uses (the app runs on @nestjs/platform-express). */
interface HeaderWriter {
  setHeader(name: string, value: string): unknown;
}

@Controller('payments')
export class PaymentsController {
  constructor(private readonly payments: PaymentsService) {}

  @Post()
  @HttpCode(201)
  @Idempotent({ required: true })
  async create(@Body() body: unknown, @Res({ passthrough: true }) res: HeaderWriter): Promise<Payment> {
    const payment = await this.payments.charge(parseCreatePayment(body));
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
