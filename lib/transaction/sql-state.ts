/** The SQLSTATE of a failed query (TypeORM's QueryFailedError keeps pg's error as `driverError`). */
export function sqlState(err: unknown): string | undefined {
  const e = err as { code?: unknown; driverError?: { code?: unknown } } | null;
  const code = e?.driverError?.code ?? e?.code;
  return typeof code === 'string' ? code : undefined;
}
