import type { OpenTransaction } from './idempotency-transactions';

/**
 * What the transaction answers a `SELECT 1` with: undefined when it is usable, else the error — e.g. 25P02 when a
 * statement aborted it, or the connection's failure when it is gone. Only on error paths: it costs a round trip.
 */
export async function probeTransaction(tx: OpenTransaction): Promise<unknown> {
  try {
    await tx.query('SELECT 1', []);
    return undefined;
  } catch (err) {
    return err;
  }
}
