import type * as BullMQ from 'bullmq';
import { requirePeer } from '../utils/optional-peer';

/** BullMQ, loaded on first use: an app without @Workflow() classes runs without it installed. */
export function bullmq(): typeof BullMQ {
  return requirePeer<typeof BullMQ>('bullmq', 'workflows (@Workflow() classes)');
}
