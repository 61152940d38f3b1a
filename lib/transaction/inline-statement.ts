import type { NamedStatement } from '../storage/postgres/statements';

/** A value sent as a literal: numbers are passed as integers, null as NULL. */
export type InlineValue = string | number | null;

/** One of the library's statements with its values, to be sent in a simple-protocol query with others. */
export interface InlineStatement {
  statement: NamedStatement;
  values: InlineValue[];
}

/**
 * The text of `statement` with its values as literals, so that it shares a round trip with the statements around
 * it (node-postgres sends one query at a time, and only a simple-protocol query can hold several). With a name it
 * is prepared under on the connection (`prepared`), `EXECUTE name(…)`; otherwise the statement's text with its `$n`
 * replaced (PgBouncer in transaction pooling: nothing is prepared).
 */
export function inlineStatementText({ statement, values }: InlineStatement, prepared?: string): string {
  const literals = values.map((v) => (v === null ? 'NULL' : typeof v === 'number' ? String(Math.trunc(v)) : quoteLiteral(v)));
  if (prepared) return `EXECUTE ${prepared}(${literals.join(', ')})`;
  return statement.text.replace(/\$(\d+)/g, (_m, n: string) => literals[Number(n) - 1]);
}

/**
 * `value` as a string literal, as node-postgres' escapeLiteral writes it (quotes doubled; with a backslash, the E''
 * form with backslashes doubled, right whatever standard_conforming_strings is), but with native string searches
 * instead of a loop that concatenates character by character (a stored response is quoted on every request).
 */
export function quoteLiteral(value: string): string {
  const quoted = value.includes("'") ? value.replace(/'/g, "''") : value;
  return value.includes('\\') ? ` E'${quoted.replace(/\\/g, '\\\\')}'` : `'${quoted}'`;
}
