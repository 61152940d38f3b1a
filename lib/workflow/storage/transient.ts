import { setTimeout as sleep } from 'node:timers/promises';

const TRANSIENT_CODES = new Set([
  // Postgres: connection exceptions, shutdown, too many connections, serialization/deadlock
  '08000', '08001', '08003', '08004', '08006', '57P01', '57P02', '57P03', '53300', '40001', '40P01',
  // Node sockets
  'ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN',
  // Node streams: a write on a socket the server (or a proxy) already closed
  'ERR_STREAM_DESTROYED', 'ERR_STREAM_WRITE_AFTER_END', 'ERR_SOCKET_CLOSED',
]);
// pg's own messages for a connection that died under a client: it has no code for them.
const TRANSIENT_MESSAGE = new RegExp([
  'Connection terminated', 'connection error', 'terminating connection', 'timeout exceeded when trying to connect',
  'Connection ended unexpectedly', 'the database system is (starting up|shutting down)', 'is not queryable',
  'Query read timeout', 'write after end', 'socket has been ended',
].join('|'), 'i');

/** True when `err` is a lost or refused database connection (worth retrying the same idempotent statement). */
export function isTransientDatabaseError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && TRANSIENT_CODES.has(code)) return true;
  return TRANSIENT_MESSAGE.test(err.message);
}

/**
 * Runs an idempotent database call, retrying while the database is unreachable (e.g. restarting), with a
 * backoff from 50 ms to 1 s, for at most `forMs`. Other errors, and the last transient one, are thrown.
 */
export async function retryTransient<T>(call: () => Promise<T>, forMs: number, isStopped: () => boolean = () => false): Promise<T> {
  const deadline = Date.now() + forMs;
  for (let delay = 50; ; delay = Math.min(delay * 2, 1000)) {
    try {
      return await call();
    } catch (err) {
      if (!isTransientDatabaseError(err) || Date.now() + delay > deadline || isStopped()) throw err;
      await sleep(delay);
    }
  }
}
