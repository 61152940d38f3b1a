/**
 * SQLSTATE classes that mean "not now" rather than "not this": connection exceptions (08), transaction
 * rollbacks such as serialization failures and deadlocks (40), insufficient resources (53), operator
 * intervention such as a shutdown (57), and system errors (58).
 */
const TRANSIENT_SQLSTATE_CLASSES = new Set(['08', '40', '53', '57', '58']);

/**
 * Whether a store error is an outage (the store could not be reached or could not work right now), as
 * opposed to a refusal of the request's data (`22001` value too long, `54000` index row too large, …).
 * Errors the server reported carry a SQLSTATE and are classified by it; errors without one come from the
 * connection (refused, reset, timed out, terminated) and are outages; programming errors are not.
 */
export function isStoreOutage(err: unknown): boolean {
  const reported = serverError(err);
  if (reported) return TRANSIENT_SQLSTATE_CLASSES.has(reported.slice(0, 2));
  return !(err instanceof TypeError || err instanceof RangeError || err instanceof SyntaxError || err instanceof ReferenceError);
}

/** The SQLSTATE of an error the Postgres server reported (pg's `DatabaseError`, or one a driver wraps). */
function serverError(err: unknown): string | undefined {
  for (let e = err, depth = 0; typeof e === 'object' && e !== null && depth < 3; depth++) {
    const { code, severity } = e as { code?: unknown; severity?: unknown };
    if (typeof code === 'string' && typeof severity === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code;
    e = (e as { driverError?: unknown; cause?: unknown }).driverError ?? (e as { cause?: unknown }).cause;
  }
  return undefined;
}
