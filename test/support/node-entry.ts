import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const ROOT = join(__dirname, '..', '..');
/** The folders a compiled child runs code from. */
const SOURCES = ['lib', 'migrations', 'sample-app', 'test'];

/**
 * The node arguments that run the TypeScript file `file` in a child process: its compiled copy when `npm test`
 * built the project for the children (TEST_BUILD_DIR, see scripts/run-tests.js; a child then boots in about a
 * fifth of the time), else the file itself through ts-node, as when a single suite runs under `npx jest`. A copy
 * older than a source file is not used: the child would run code that is no longer there.
 */
export function nodeEntry(file: string): string[] {
  const build = process.env.TEST_BUILD_DIR;
  if (build && buildIsCurrent(build)) {
    const compiled = join(build, relative(ROOT, file)).replace(/\.ts$/, '.js');
    if (existsSync(compiled)) return [compiled];
  }
  return ['-r', 'ts-node/register/transpile-only', file];
}

let current: { build: string; current: boolean } | undefined;

/** Whether no source file changed since `build` was compiled (checked once per suite). */
function buildIsCurrent(build: string): boolean {
  if (current?.build === build) return current.current;
  const builtAt = statSync(join(build, 'lib', 'index.js'), { throwIfNoEntry: false })?.mtimeMs ?? 0;
  const changed = SOURCES.map((dir) => newestChange(join(ROOT, dir))).reduce((a, b) => Math.max(a, b), 0);
  current = { build, current: changed <= builtAt };
  if (!current.current) {
    process.stderr.write(`[node-entry] ${build} is older than the sources (or not built): child processes run through ts-node\n`);
  }
  return current.current;
}

function newestChange(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestChange(path));
    else if (entry.name.endsWith('.ts')) newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest;
}
