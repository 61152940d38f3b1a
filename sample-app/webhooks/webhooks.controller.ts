import { Body, Controller, Get, HttpCode, Param, Post } from '@nestjs/common';
import { InboxService, SkipIdempotency } from '../../lib';
import { Public } from '../auth/public.decorator';
import { parsePaymentEvent } from './payment-event';
import { PaymentEventsRepository } from './payment-events.repository';

/**
 * Receives the payment provider's webhooks: each event id is handled once, however often it is delivered.
 * No bearer token: a real provider is authenticated by its payload signature (not shown here). Deliveries are
 * deduplicated by event id through the inbox, so the Idempotency-Key interceptor stays out of the way.
 */
@Public()
@SkipIdempotency()
@Controller('webhooks/payment-provider')
export class WebhooksController {
  constructor(
    private readonly inbox: InboxService,
    private readonly events: PaymentEventsRepository,
  ) {}

  @Post()
  @HttpCode(200)
  async receive(@Body() body: unknown): Promise<{ eventId: string; status: 'processed' | 'duplicate' }> {
    const event = parsePaymentEvent(body);
    const outcome = await this.inbox.process(event.id, 'payment-provider', (manager) => this.events.insert(manager, event));
    return { eventId: event.id, status: outcome.status };
  }

  @Get('events/:eventId/count')
  async count(@Param('eventId') eventId: string): Promise<{ count: number }> {
    return { count: await this.events.countFor(eventId) };
  }
}
