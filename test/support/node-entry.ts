import { existsSync } from 'node:fs';
import { join, relative } from 'node:path';

const ROOT = join(__dirname, '..', '..');

/**
 * The node arguments that run the TypeScript file `file` in a child process: its compiled copy when `npm test`
 * built the project for the children (TEST_BUILD_DIR, see scripts/run-tests.js; a child then boots in about a
 * fifth of the time), else the file itself through ts-node, as when a single suite runs under `npx jest`.
 */
export function nodeEntry(file: string): string[] {
  const build = process.env.TEST_BUILD_DIR;
  if (build) {
    const compiled = join(build, relative(ROOT, file)).replace(/\.ts$/, '.js');
    if (existsSync(compiled)) return [compiled];
  }
  return ['-r', 'ts-node/register/transpile-only', file];
}
