/** SQLSTATE classes of failures that are no row's doing: each row alone would fail the same way. */
const STATEMENT_WIDE_CLASSES = new Set([
  '08', // connection exception
  '53', // insufficient resources
  '57', // operator intervention: query canceled (statement_timeout), admin shutdown, cannot connect now
  '58', // system error
  'XX', // internal error
]);

/**
 * An error Postgres raised for a statement (it has a SQLSTATE) that one of its rows may have caused — a value it
 * refuses (classes 22, 54), a constraint (23), a row touched twice (21000) — or a wait it gave up (lock timeout,
 * deadlock, serialization failure): the statement changed nothing, and its rows may fare better alone. Connection,
 * resource, cancellation and internal failures, and errors without a SQLSTATE (the pool's, the driver's), would
 * fail each row the same way.
 */
export function isRowLevelFailure(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || code.length !== 5) return false;
  return !STATEMENT_WIDE_CLASSES.has(code.slice(0, 2));
}
