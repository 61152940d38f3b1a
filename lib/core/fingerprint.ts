import { createHash } from 'node:crypto';

/**
 * SHA-256 over the parts, each length-prefixed so that no two different part lists collide by concatenation:
 * the digest of `<byte length>:<bytes>` for every part in turn. Runs on every request: the common case (all
 * parts strings) is hashed as one string in one call, which gives the same digest as part-by-part updates.
 */
export function fingerprint(parts: readonly (string | Buffer)[]): string {
  const hash = createHash('sha256');
  let text = '';
  for (const part of parts) {
    if (typeof part === 'string') {
      text += `${Buffer.byteLength(part, 'utf8')}:${part}`;
      continue;
    }
    if (text !== '') hash.update(text, 'utf8');
    text = '';
    hash.update(`${part.length}:`);
    hash.update(part);
  }
  if (text !== '') hash.update(text, 'utf8');
  return hash.digest('base64url');
}
