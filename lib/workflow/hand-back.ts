import type { Logger } from '@nestjs/common';
import type { Job } from 'bullmq';

/**
 * Puts back jobs whose workflow or step this instance does not know (another application on the same queues, or an
 * older instance during a rolling deploy): each is delayed by about `delayMs` for another worker to take, without
 * counting an attempt, a failure or a recovery. Each unknown name is logged once.
 */
export class JobHandBack {
  private readonly warned = new Set<string>();

  constructor(private readonly logger: Logger, private readonly delayMs: number) {}

  /** Moves the job (locked by `token`) back to delayed; throws the DelayedError BullMQ expects, which the processor must let through. */
  async send(job: Job, token: string | undefined, what: string): Promise<never> {
    if (!this.warned.has(what)) {
      this.warned.add(what);
      this.logger.warn(`${what} is not registered in this instance; its jobs are handed back for an instance that knows it`);
    }
    // Jitter keeps instances that all lack it from taking it back in lockstep.
    await job.moveToDelayed(Date.now() + Math.round(this.delayMs * (0.5 + Math.random())), token);
    throw new MovedToDelayed();
  }
}

/** BullMQ leaves a job where the processor moved it when the error is named `DelayedError` (no bullmq import needed). */
class MovedToDelayed extends Error {
  override readonly name = 'DelayedError';
}
