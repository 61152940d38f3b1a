import { canonicalJson } from '../utils/canonical-json';
import { fingerprint } from '../core/fingerprint';
import type { IdempotencyRequest } from '../interfaces/idempotency-options.interface';

/**
 * Fingerprint of method, path with query, and the body in canonical JSON (keys sorted, whitespace gone),
 * leaving out the named body fields. Raw bodies (Buffer, text) are hashed as they are.
 */
export function requestFingerprint(request: IdempotencyRequest, ignoreBodyFields: readonly string[]): string {
  const url = request.originalUrl ?? request.url;
  return fingerprint([request.method.toUpperCase(), url, bodyBytes(request.body, ignoreBodyFields)]);
}

function bodyBytes(body: unknown, ignore: readonly string[]): string | Buffer {
  if (body === undefined || body === null) return '';
  if (Buffer.isBuffer(body)) return body;
  if (typeof body === 'string') return `s:${body}`;
  const pruned = ignore.length > 0 && typeof body === 'object' ? withoutFields(body as Record<string, unknown>, ignore) : body;
  return `j:${canonicalJson(pruned)}`;
}

function withoutFields(body: Record<string, unknown>, paths: readonly string[]): unknown {
  const copy = structuredClone(body);
  for (const path of paths) {
    const parts = path.split('.');
    let node: unknown = copy;
    for (let i = 0; i < parts.length - 1 && node !== null && typeof node === 'object'; i++) {
      node = (node as Record<string, unknown>)[parts[i]];
    }
    if (node !== null && typeof node === 'object') delete (node as Record<string, unknown>)[parts[parts.length - 1]];
  }
  return copy;
}
