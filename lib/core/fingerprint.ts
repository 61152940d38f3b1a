import { createHash, hash } from 'node:crypto';

/**
 * SHA-256 over the parts, each length-prefixed so that no two different part lists collide by concatenation:
 * the digest of `<byte length>:<bytes>` for every part in turn. Runs on every request: the common case (all
 * parts strings) is hashed as one string by the one-shot `crypto.hash` (no Hash object), which gives the same
 * digest as part-by-part updates.
 */
export function fingerprint(parts: readonly (string | Buffer)[]): string {
  let text = '';
  let i = 0;
  for (; i < parts.length; i++) {
    const part = parts[i];
    if (typeof part !== 'string') break;
    text += `${Buffer.byteLength(part, 'utf8')}:${part}`;
  }
  if (i === parts.length) return hash('sha256', text, 'base64url');
  const digest = createHash('sha256');
  if (text !== '') digest.update(text, 'utf8');
  text = '';
  for (; i < parts.length; i++) {
    const part = parts[i];
    if (typeof part === 'string') {
      text += `${Buffer.byteLength(part, 'utf8')}:${part}`;
      continue;
    }
    if (text !== '') digest.update(text, 'utf8');
    text = '';
    digest.update(`${part.length}:`);
    digest.update(part);
  }
  if (text !== '') digest.update(text, 'utf8');
  return digest.digest('base64url');
}
