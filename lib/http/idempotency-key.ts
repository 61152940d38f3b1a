/** Longest key accepted, in characters. */
export const MAX_KEY_LENGTH = 255;

const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;

/**
 * Reads the key from the header value: the structured-field string form `"abc"` and the bare `abc`
 * are the same key. Returns the key, or an error message for a 400.
 */
export function parseIdempotencyKey(raw: string | string[]): { key: string } | { error: string } {
  if (Array.isArray(raw)) {
    if (raw.length !== 1) return { error: 'send the idempotency key header once' };
    raw = raw[0];
  }
  let value = raw.trim();
  if (value.startsWith('"')) {
    const inner = unquote(value);
    if (inner === null) return { error: 'the idempotency key is a malformed quoted string' };
    value = inner;
  }
  if (value.length === 0) return { error: 'the idempotency key is empty' };
  if (value.length > MAX_KEY_LENGTH) return { error: `the idempotency key is longer than ${MAX_KEY_LENGTH} characters` };
  if (!PRINTABLE_ASCII.test(value)) return { error: 'the idempotency key may contain only printable ASCII characters' };
  return { key: value };
}

/** Structured-field sf-string (RFC 8941 §3.3.3): only \" and \\ escapes, no bare quote inside. */
function unquote(value: string): string | null {
  if (value.length < 2 || !value.endsWith('"')) return null;
  let out = '';
  for (let i = 1; i < value.length - 1; i++) {
    const ch = value[i];
    if (ch === '\\') {
      const next = value[i + 1];
      if ((next !== '"' && next !== '\\') || i + 1 >= value.length - 1) return null;
      out += next;
      i++;
    } else if (ch === '"') {
      return null;
    } else {
      out += ch;
    }
  }
  return out;
}
