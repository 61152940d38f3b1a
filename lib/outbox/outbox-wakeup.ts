import type { Client, Pool } from 'pg';

/**
 * Wakes idle relay loops as soon as a publishing transaction commits: a dedicated connection LISTENs on the
 * outbox channel (the publish statement NOTIFYs it, delivered at commit). Lost connections are re-opened after
 * `retryMs`; meanwhile, and behind poolers where LISTEN does not work, the relay's polling finds the messages.
 */
export class OutboxWakeup {
  private client?: Client;
  private closed = false;
  private retry?: NodeJS.Timeout;
  private waiters = new Set<() => void>();

  constructor(
    private readonly pool: Pool,
    private readonly channel: string,
    private readonly retryMs: number,
  ) {}

  start(): void {
    void this.connect();
  }

  /** Resolves on the next notification (or `wake()`), or after `ms`. */
  wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiters.add(done);
    });
  }

  /** Wakes every waiting loop. */
  wake(): void {
    for (const done of [...this.waiters]) done();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    this.wake();
    await this.client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { Client } = require('pg') as typeof import('pg');
    const client = new Client(this.pool.options);
    this.client = client;
    let failed = false;
    const reconnect = () => {
      if (failed) return;
      failed = true;
      void client.end().catch(() => undefined);
      if (!this.closed) this.retry = setTimeout(() => void this.connect(), this.retryMs);
    };
    client.on('error', reconnect);
    client.on('end', reconnect);
    client.on('notification', () => this.wake());
    try {
      await client.connect();
      await client.query(`LISTEN "${this.channel}"`);
      if (this.closed) await client.end();
      // Whatever was committed while no connection listened is found by the next pass.
      else this.wake();
    } catch {
      reconnect();
    }
  }
}
