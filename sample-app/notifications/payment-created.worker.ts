import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { Job, Worker } from 'bullmq';
import { DEFAULT_PAYMENT_EVENTS_QUEUE, PaymentCreated } from './payment-created';
import { PaymentNotifier } from './payment-notifier';

/** Consumes `payment.created` from BullMQ (when the app has Redis) and hands each job to the notifier. */
@Injectable()
export class PaymentCreatedWorker implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private worker?: Worker<PaymentCreated>;

  constructor(
    private readonly config: ConfigService,
    private readonly notifier: PaymentNotifier,
  ) {}

  onApplicationBootstrap(): void {
    const logger = new Logger('PaymentCreatedWorker');
    const queue = this.config.get<string>('OUTBOX_PAYMENTS_QUEUE') || DEFAULT_PAYMENT_EVENTS_QUEUE;
    const lockMs = Number(this.config.get<string>('NOTIFICATIONS_LOCK_DURATION_MS') || 30_000);
    this.worker = new Worker<PaymentCreated>(queue, (job: Job<PaymentCreated>) => this.notifier.onPaymentCreated(job.data), {
      connection: { url: this.config.getOrThrow<string>('REDIS_URL') },
      // A job whose worker died (SIGKILL) is taken over after its lock lapses.
      lockDuration: lockMs,
      stalledInterval: lockMs,
    });
    this.worker.on('error', (err) => logger.warn(err.message));
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.worker?.close();
  }
}
