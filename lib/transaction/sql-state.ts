/** The SQLSTATE of a failed query (TypeORM's QueryFailedError keeps pg's error as `driverError`). */
export function sqlState(err: unknown): string | undefined {
  const e = err as { code?: unknown; driverError?: { code?: unknown } } | null;
  const code = e?.driverError?.code ?? e?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * Postgres refused a statement because an earlier one had failed in the same transaction (SQLSTATE 25P02, "in failed
 * SQL transaction"): the transaction is aborted, and nothing of it can commit.
 */
export function inFailedTransaction(err: unknown): boolean {
  return sqlState(err) === '25P02';
}
