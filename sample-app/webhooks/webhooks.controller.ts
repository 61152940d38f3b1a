import { Body, Controller, Get, HttpCode, Logger, Optional, Param, Post } from '@nestjs/common';
import { InboxService, SkipIdempotency, WorkflowClient, WorkflowFinishedError, WorkflowNotFoundError } from '../../lib';
import { Public } from '../auth/public.decorator';
import { PaymentEvent, parsePaymentEvent } from './payment-event';
import { PAYMENT_CONFIRMED, PaymentConfirmed } from '../orders/process-order.workflow';
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
  private readonly logger = new Logger('Webhooks');

  constructor(
    private readonly inbox: InboxService,
    private readonly events: PaymentEventsRepository,
    // Workflows need Redis: without it the app has no orders, and confirmations have nowhere to go.
    @Optional() private readonly workflows?: WorkflowClient,
  ) {}

  @Post()
  @HttpCode(200)
  async receive(@Body() body: unknown): Promise<{ eventId: string; status: 'processed' | 'duplicate' }> {
    const event = parsePaymentEvent(body);
    const outcome = await this.inbox.process(event.id, 'payment-provider', async (manager) => {
      await this.events.insert(manager, event);
      await this.confirmOrder(event);
    });
    return { eventId: event.id, status: outcome.status };
  }

  /**
   * `payment.confirmed`: tells the waiting order workflow (its `recv('payment.confirmed')`). Sent inside the inbox's
   * handler with the event id as idempotency key: a failed send rolls the inbox entry back (the provider redelivers),
   * and a redelivery after a lost reply stores the message once.
   */
  private async confirmOrder(event: PaymentEvent): Promise<void> {
    const orderId = event.data?.orderId;
    if (event.type !== PAYMENT_CONFIRMED || !orderId || !this.workflows) return;
    const message: PaymentConfirmed = { eventId: event.id, paymentId: event.data?.paymentId ?? null };
    try {
      await this.workflows.send(`order-${orderId}`, message, { topic: PAYMENT_CONFIRMED, idempotencyKey: event.id });
    } catch (err) {
      // An unknown or finished order cannot use the confirmation; the event is still recorded.
      if (!(err instanceof WorkflowNotFoundError) && !(err instanceof WorkflowFinishedError)) throw err;
      this.logger.warn(`payment event ${event.id} confirms order ${orderId}, which is not waiting for it: ${err.message}`);
    }
  }

  @Get('events/:eventId/count')
  async count(@Param('eventId') eventId: string): Promise<{ count: number }> {
    return { count: await this.events.countFor(eventId) };
  }
}
