/** Raised when a value has no canonical JSON form (functions, symbols, BigInt, cycles, non-finite numbers). */
export class NotSerializableError extends Error {
  constructor(readonly path: string, reason: string) {
    super(`value at ${path} cannot be serialized to JSON: ${reason}`);
    this.name = 'NotSerializableError';
  }
}

/**
 * Canonical JSON: object keys sorted at every depth, array order kept, no whitespace.
 * `{"b":2,"a":1}` and `{"a":1,"b":2}` give the same text. `toJSON()` is honoured (Dates become ISO strings).
 */
export function canonicalJson(value: unknown): string {
  return write(value, '$', new Set());
}

function write(value: unknown, path: string, seen: Set<object>): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) throw new NotSerializableError(path, `${value} is not a finite number`);
      return JSON.stringify(value);
    case 'undefined':
      return 'null';
    case 'bigint':
      throw new NotSerializableError(path, 'BigInt has no JSON form');
    case 'function':
    case 'symbol':
      throw new NotSerializableError(path, `${typeof value} has no JSON form`);
  }
  const obj = value as Record<string, unknown> & { toJSON?: () => unknown };
  if (typeof obj.toJSON === 'function') return write(obj.toJSON(), path, seen);
  if (seen.has(obj)) throw new NotSerializableError(path, 'circular reference');
  seen.add(obj);
  try {
    if (Array.isArray(obj)) {
      return `[${obj.map((item, i) => write(item, `${path}[${i}]`, seen)).join(',')}]`;
    }
    if (obj instanceof Map || obj instanceof Set) {
      throw new NotSerializableError(path, `${obj.constructor.name} has no JSON form; convert it to an object or array`);
    }
    const parts: string[] = [];
    for (const key of Object.keys(obj).sort()) {
      const item = obj[key];
      if (item === undefined || typeof item === 'function' || typeof item === 'symbol') continue;
      parts.push(`${JSON.stringify(key)}:${write(item, `${path}.${key}`, seen)}`);
    }
    return `{${parts.join(',')}}`;
  } finally {
    seen.delete(obj);
  }
}
