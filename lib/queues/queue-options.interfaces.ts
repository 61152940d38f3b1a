import type { Duration } from '../utils/duration';

/**
 * Settings of one BullMQ queue (a workflow queue, a step queue, later a task queue), given in the module's `queues`
 * option by queue name. See README "Queues".
 */
export interface QueueOptions {
  /** How long finished executions whose workflow runs on this queue are kept (as `retention.queues`). */
  retention?: Duration;
  /**
   * Jobs started per time window across ALL instances (BullMQ's queue limiter, counted in Redis):
   * `"100/s"`, `"20/min"`, `"5/h"` (also `sec`, `second`, `m`, `minute`, `hour`).
   */
  rateLimit?: string;
  /** Jobs of this queue each instance runs at once; overrides `workflows.concurrency` / `workflows.workflowConcurrency`. */
  concurrency?: number;
  /** BullMQ job priority of every job added to this queue: 1 is the highest, up to 2,097,152. Default: none (FIFO). */
  priority?: number;
}

/** A queue's settings after validation (internal). */
export interface ResolvedQueueOptions {
  retentionMs?: number;
  rateLimit?: { max: number; durationMs: number };
  concurrency?: number;
  priority?: number;
}
