import type { Provider } from '@nestjs/common';
import { OutboxHandlers } from './outbox-handlers';
import { OutboxRelay } from './outbox-relay';
import { OutboxTargets } from './outbox-targets';
import { OutboxService } from './outbox.service';

/** The transactional outbox: the publishing service, handler discovery, delivery targets and the relay. */
export const outboxProviders: Provider[] = [OutboxService, OutboxHandlers, OutboxTargets, OutboxRelay];
