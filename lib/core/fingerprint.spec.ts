import { createHash } from 'node:crypto';
import { fingerprint } from './fingerprint';

/** The definition: every part fed to SHA-256 as `<byte length>:` then its bytes, one update each. */
function reference(parts: readonly (string | Buffer)[]): string {
  const hash = createHash('sha256');
  for (const part of parts) {
    const bytes = typeof part === 'string' ? Buffer.from(part, 'utf8') : part;
    hash.update(`${bytes.length}:`);
    hash.update(bytes);
  }
  return hash.digest('base64url');
}

describe('fingerprint', () => {
  // Stored fingerprints must stay comparable: the one-string fast path gives the digest of the definition.
  it.each([
    ['ascii parts', ['POST', '/orders?x=1', 'data', 'application/json', '{"a":1,"b":2}']],
    ['multi-byte text', ['POST', '/ü', 'text', 'text/plain', 'naïve € 日本 😀']],
    ['lone surrogates', ['POST', '/a', 'text', '', '\uD83D', '\uDE00x']],
    ['empty parts', ['', '', '', '']],
    ['buffers among strings', ['POST', '/up', 'bytes', 'application/octet-stream', Buffer.from([0, 1, 2, 255])]],
    ['buffers first and last', [Buffer.alloc(0), 'mid', Buffer.from('é', 'utf8')]],
  ] as [string, (string | Buffer)[]][])('%s: same digest as part-by-part hashing', (_name, parts) => {
    expect(fingerprint(parts)).toBe(reference(parts));
  });

  it('length prefixes keep different part lists apart', () => {
    expect(fingerprint(['ab', 'c'])).not.toBe(fingerprint(['a', 'bc']));
    expect(fingerprint(['a:', 'b'])).not.toBe(fingerprint(['a', ':b']));
  });
});
