import type { Pool, PoolClient } from 'pg';

/**
 * Checks a client out of the pool for a connection-long task (a transaction). pg-pool drops its
 * idle-error listener on checkout, so a server restart would emit 'error' on an unwatched client and crash the
 * process; this keeps a listener on it, and a client that failed is discarded instead of returned to the pool.
 */
export async function withClient<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let failure: Error | undefined;
  const onError = (err: Error) => {
    failure = err;
  };
  client.on('error', onError);
  try {
    return await work(client);
  } catch (err) {
    failure ??= err instanceof Error ? err : new Error(String(err));
    throw err;
  } finally {
    client.off('error', onError);
    client.release(failure);
  }
}
