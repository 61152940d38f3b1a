// The chaos run's HTTP client: spreads requests over the instances (client-side round robin) and retries as a real
// client would — on 409, 5xx and connection errors, with jittered exponential backoff, up to a bound.
import type { Instance } from './instances';

/** What one response (or failed attempt) was, as the report counts it. */
export type OutcomeClass = 'ok' | 'replayed' | '409' | '422' | '503' | 'other5xx' | 'other4xx' | 'connection';

/** Counts of client-visible outcomes; `gaveUp` counts requests that ran out of attempts. */
export type OutcomeCounts = Record<OutcomeClass | 'gaveUp' | 'sent', number>;

export function emptyCounts(): OutcomeCounts {
  return { sent: 0, ok: 0, replayed: 0, '409': 0, '422': 0, '503': 0, other5xx: 0, other4xx: 0, connection: 0, gaveUp: 0 };
}

/** A 2xx a client saw for a key. */
export interface Seen {
  body: string;
  replayed: boolean;
}

export interface RetryPolicy {
  attempts: number;
  baseMs: number;
  maxMs: number;
  timeoutMs: number;
}

export class ChaosClient {
  readonly counts = emptyCounts();
  /** Every 2xx per key, in the order the client received them. */
  readonly seen = new Map<string, Seen[]>();
  /** The first few bodies of unexpected answers (5xx other than 503, 4xx other than 409/422), to investigate. */
  readonly unexpected: string[] = [];
  private next = 0;

  constructor(
    private readonly instances: Instance[],
    private readonly retry: RetryPolicy,
  ) {}

  /**
   * Sends POST `path` until a final answer (2xx, 422, other 4xx) or the attempts run out. `first` picks the instance
   * of the first attempt (round robin when omitted); each retry goes to the next instance.
   */
  async send(path: string, key: string, headers: Record<string, string> = {}, first?: number): Promise<Seen | undefined> {
    let target = first ?? this.next++;
    for (let attempt = 1; attempt <= this.retry.attempts; attempt++) {
      const instance = this.instances[target++ % this.instances.length];
      const outcome = await this.attempt(instance.url + path, headers);
      this.counts.sent++;
      this.counts[outcome.cls]++;
      if (outcome.seen) {
        const list = this.seen.get(key) ?? [];
        list.push(outcome.seen);
        this.seen.set(key, list);
        return outcome.seen;
      }
      if (outcome.cls === '422' || outcome.cls === 'other4xx') return undefined;
      const backoff = Math.min(this.retry.maxMs, this.retry.baseMs * 2 ** (attempt - 1));
      await new Promise((resolve) => setTimeout(resolve, backoff * (0.5 + Math.random())));
    }
    this.counts.gaveUp++;
    return undefined;
  }

  private async attempt(url: string, headers: Record<string, string>): Promise<{ cls: OutcomeClass; seen?: Seen }> {
    let response: Response;
    let body: string;
    try {
      response = await fetch(url, { method: 'POST', headers, signal: AbortSignal.timeout(this.retry.timeoutMs) });
      body = await response.text();
    } catch {
      return { cls: 'connection' };
    }
    const status = response.status;
    if (status >= 200 && status < 300) {
      const replayed = response.headers.get('idempotent-replayed') === 'true';
      return { cls: replayed ? 'replayed' : 'ok', seen: { body, replayed } };
    }
    if (status === 409 || status === 422 || status === 503) return { cls: String(status) as OutcomeClass };
    if (this.unexpected.length < 5) this.unexpected.push(`${status} ${url}: ${body.slice(0, 300)}`);
    return { cls: status >= 500 ? 'other5xx' : 'other4xx' };
  }
}

/** Runs `tasks` with at most `concurrency` at once. */
export async function pool<T>(items: T[], concurrency: number, task: (item: T, index: number) => Promise<void>): Promise<void> {
  let index = 0;
  const lanes = Array.from({ length: Math.min(concurrency, items.length) }, async () => {
    while (index < items.length) {
      const i = index++;
      await task(items[i], i);
    }
  });
  await Promise.all(lanes);
}
