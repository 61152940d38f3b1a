import { IdempotencyError } from './idempotency.error';

/** A message was published to a topic that `outbox.topics` does not configure, or the outbox is not configured at all. */
export class OutboxTopicUnknownError extends IdempotencyError {
  readonly code = 'OUTBOX_TOPIC_UNKNOWN';

  constructor(readonly topic: string, known: string[]) {
    super(
      known.length === 0
        ? `cannot publish "${topic}": the outbox is not configured; set IdempotencyModule's outbox: { topics: { "${topic}": { to: "bullmq", queue: "…" } } }`
        : `cannot publish "${topic}": not one of outbox.topics (${known.map((k) => `"${k}"`).join(', ')}); add it there with its target`,
    );
    this.name = 'OutboxTopicUnknownError';
  }
}
