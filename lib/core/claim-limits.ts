import { IdempotencyInputTooLongError } from '../errors/idempotency-input-too-long.error';
import type { ClaimRequest } from './idempotency-record';

/**
 * Longest key, in UTF-8 bytes. Scope and key share one Postgres B-tree index entry (at most 2,704 bytes),
 * so each gets 1,024; an HTTP key is further limited to 255 printable ASCII characters by the interceptor.
 */
export const MAX_KEY_BYTES = 1024;
/** Longest scope, in UTF-8 bytes (with its `http:` / `method:` prefix). */
export const MAX_SCOPE_BYTES = 1024;

/** Refuses a key or scope the store could not index, before the store is asked. */
export function assertClaimLimits(request: Pick<ClaimRequest, 'scope' | 'key'>): void {
  check('scope', request.scope, MAX_SCOPE_BYTES);
  check('key', request.key, MAX_KEY_BYTES);
}

function check(input: 'key' | 'scope', value: string, limit: number): void {
  // Cheap first: no string of at most limit/3 characters can exceed the limit in UTF-8.
  if (value.length * 3 <= limit) return;
  const bytes = Buffer.byteLength(value, 'utf8');
  if (bytes > limit) throw new IdempotencyInputTooLongError(input, bytes, limit);
}
