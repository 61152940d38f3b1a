import { createHash } from 'node:crypto';

/** SHA-256 over the parts, each length-prefixed so that no two different part lists collide by concatenation. */
export function fingerprint(parts: readonly (string | Buffer)[]): string {
  const hash = createHash('sha256');
  for (const part of parts) {
    const bytes = typeof part === 'string' ? Buffer.from(part, 'utf8') : part;
    hash.update(`${bytes.length}:`);
    hash.update(bytes);
  }
  return hash.digest('base64url');
}
