/**
 * A Postgres error one row of a statement can cause (data exceptions, integrity violations), or a wait it gave up
 * (lock timeout, deadlock, serialization failure): the statement changed nothing, and its rows may fare better
 * alone. Other failures (the connection, the server, a statement timeout) would fail each row the same way.
 */
export function isRowLevelFailure(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return false;
  return code.startsWith('22') || code.startsWith('23') || code.startsWith('40') || code === '55P03';
}
