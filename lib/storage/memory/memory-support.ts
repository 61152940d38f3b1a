/** A value as a JSON column stores it (`undefined` → null, a `Date` → its ISO string), as text. */
export function toJson(value: unknown): string {
  return JSON.stringify(value) ?? 'null';
}

/** Reads back what {@link toJson} stored: a fresh copy each time. */
export function fromJson(text: string | null): unknown {
  return text === null ? null : (JSON.parse(text) as unknown);
}

/** A fresh copy of a value as a JSON column would return it. */
export function jsonCopy<T>(value: T): T {
  return fromJson(toJson(value)) as T;
}

/** One map key per (scope, key); the scope's length keeps it unambiguous whatever characters both contain. */
export function slot(scope: string, key: string): string {
  return `${scope.length}:${scope}|${key}`;
}
