/** A query the stores send: with a `name`, pg prepares it once per connection and reuses it. */
export interface NamedStatement {
  name?: string;
  text: string;
}

/** What the Postgres stores read from the connections: the pool's owner, the schema, and whether to name statements. */
export interface StoreConnection {
  readonly schema: string;
  readonly preparedStatements: boolean;
}

/**
 * The statements as given, or, with `preparedStatements: false`, the same statements without their names, so pg
 * sends them unnamed (parsed on each call): a server connection behind PgBouncer's transaction pooling may not be
 * the one a named statement was prepared on.
 */
export function withPreparedStatements<T extends object>(statements: T, prepared: boolean): T {
  if (prepared) return statements;
  const unnamed: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(statements)) {
    const isStatement = typeof value === 'object' && value !== null && 'name' in value && 'text' in value;
    unnamed[key] = isStatement ? { text: (value as NamedStatement).text } : value;
  }
  return unnamed as T;
}
