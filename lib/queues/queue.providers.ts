import type { Provider } from '@nestjs/common';
import { QueueSettings } from './queue-settings';

/** The per-queue settings registry (`queues` option). */
export const queueProviders: Provider[] = [QueueSettings];

/** The queue providers an application (or another worker creator) may inject. */
export const queueExports = [QueueSettings];
