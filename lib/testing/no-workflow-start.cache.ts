import type { IdempotencyConnections } from '../storage/idempotency-connections';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { WorkflowStartCache } from '../workflow/workflow-start.cache';

/** The start cache of IdempotencyTestingModule: there is no Redis, so it never answers and the store decides. */
export class NoWorkflowStartCache extends WorkflowStartCache {
  constructor() {
    super({ redis: false } as ResolvedOptions, undefined as unknown as IdempotencyConnections);
  }

  override completed(): Promise<undefined> {
    return Promise.resolve(undefined);
  }

  override remember(): Promise<void> {
    return Promise.resolve();
  }

  override forget(): Promise<void> {
    return Promise.resolve();
  }
}
