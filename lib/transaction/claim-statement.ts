import type { PoolClient } from 'pg';
import type { ClaimOutcome } from '../core/idempotency-record';

/** What a claim made inside a transaction found: a claim outcome, or why it must be asked again / given up. */
export type ClaimAttempt =
  | ClaimOutcome
  /** A claim committed after the statement's snapshot decided the key (or a serialization failure): ask again in a new transaction. */
  | 'raced'
  /** Another transaction's uncommitted claim of the key held it longer than the allowed wait. */
  | 'lock timeout';

/**
 * The claim as one statement of a simple-protocol query, so that it shares a round trip with the BEGIN before it and
 * the savepoint after it (node-postgres sends one query at a time). Values become literals: with a statement
 * already prepared on the connection (`prepared`), `EXECUTE name(…)`; otherwise the statement's text with its
 * `$n` replaced (PgBouncer in transaction pooling: nothing is prepared). Numbers are passed as integers.
 */
export function claimStatementText(client: PoolClient, text: string, values: (string | number)[], prepared?: string): string {
  const literals = values.map((v) => (typeof v === 'number' ? String(Math.trunc(v)) : client.escapeLiteral(v)));
  if (prepared) return `EXECUTE ${prepared}(${literals.join(', ')})`;
  return text.replace(/\$(\d+)/g, (_m, n: string) => literals[Number(n) - 1]);
}
