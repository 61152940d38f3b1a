import { INestApplication } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';

export { sleep };

/**
 * Waits until `check` returns a truthy value and returns it; fails with `what` after `timeoutMs`.
 * The bound only keeps a broken run from hanging; assertions never depend on how long it took.
 */
export async function waitUntil<T>(what: string, check: () => Promise<T> | T, { timeoutMs = 20_000, intervalMs = 50 } = {}): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      const reason = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
      throw new Error(`timed out waiting until ${what}${reason}`);
    }
    await sleep(intervalMs);
  }
}

/** Listens on 127.0.0.1 on a free port and returns the base URL, so concurrent requests share one server. */
export async function listen(app: INestApplication): Promise<string> {
  await app.listen(0, '127.0.0.1');
  const server = app.getHttpServer() as { address(): { port: number } };
  return `http://127.0.0.1:${server.address().port}`;
}

/** A promise with its resolver, to hold a handler until the test lets it go. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

/** The Redis keys the cache uses for a key; the interceptor's global scope is `http:`. */
export function redisKeys(prefix: string, key: string, scope = 'http:'): { record: string; marker: string } {
  const tag = `${prefix}:{${scope.length}:${scope}|${key}}`;
  return { record: `${tag}:r`, marker: `${tag}:f` };
}
