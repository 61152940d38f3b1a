import { readFileSync } from 'node:fs';
import { dirname, join, sep } from 'node:path';

const ROOT = join(__dirname, '..', '..');
const PEERS = ['typeorm', 'bullmq', 'ioredis', 'pg'] as const;

/** The folder a package was loaded from (its package.json is not always exported, so walk up from its entry). */
function packageDir(name: string): string {
  let dir = dirname(require.resolve(name));
  while (!dir.endsWith(`${sep}node_modules${sep}${name}`)) dir = dirname(dir);
  return dir;
}

function version(dir: string): string {
  return (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version: string }).version;
}

// Under `npm test` this runs three more times with COMPAT_PEERS (compat/peers/jest.config.js): the versions the
// other suites ran on must be the ones that folder pins, not the root's.
describe('peer versions the suites run on', () => {
  const set = process.env.COMPAT_PEERS;
  // A set pins some peers; the others (pg, in all sets but `oldest`) come from the root install.
  const pinned = set
    ? (JSON.parse(readFileSync(join(ROOT, 'compat', 'peers', set, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }).dependencies
    : {};

  it.each(PEERS)('%s is loaded from the expected install, in the declared peer range', (name) => {
    const dir = packageDir(name);
    const from = pinned[name] ? join(ROOT, 'compat', 'peers', set!) : ROOT;
    expect(dir).toBe(join(from, 'node_modules', name));
    expect(version(dir)).toBe(pinned[name] ?? version(join(ROOT, 'node_modules', name)));
    const range = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { peerDependencies: Record<string, string> }).peerDependencies[name];
    const [major, minor, patch] = version(dir).split('.').map(Number);
    const caret = ([M, m, p]: number[]) => (M > 0 ? major === M && (minor > m || (minor === m && patch >= p)) : major === 0 && minor === m && patch >= p);
    expect(range.split('||').some((r) => caret(r.trim().replace(/^\^/, '').split('.').map(Number)))).toBe(true);
  });
});
