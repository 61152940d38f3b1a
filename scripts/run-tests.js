'use strict';
// `npm test`: type check (which also writes the compiled copy the suites' child processes run) and lint, then the
// Jest suites (NestJS 11), the core suites again through PgBouncer in transaction pooling (compat/pgbouncer), the
// NestJS 12 compatibility suite and the peer-version suites (compat/peers: the oldest and newest typeorm, bullmq and
// ioredis the package accepts, and the oldest pg), all against one Postgres and one Redis that this script starts on
// 127.0.0.1 (unless DATABASE_URL and REDIS_URL are set) and stops at the end.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { ensureServices, ROOT } = require('./services');

/**
 * The compiled copy of the project that the suites' child processes run (test/support/node-entry.ts): booting a
 * child through ts-node took about 6 s on the 2-core CI machine, its compiled copy about 1.4 s, and the suites start
 * about a hundred children.
 */
const BUILD_DIR = path.join(ROOT, '.data', 'test-build');

/** Folders of compat/peers, each pinning one combination of typeorm, bullmq and ioredis (see compat/peers/README.md). */
const PEER_SETS = ['oldest', 'v5-latest', 'v6-oldest'];

function run(label, cmd, args, options = {}) {
  process.stdout.write(`\n[test] ${label}: ${cmd} ${args.join(' ')}\n`);
  const r = spawnSync(cmd, args, { cwd: ROOT, stdio: 'inherit', ...options });
  if (r.status !== 0) throw Object.assign(new Error(`${label} failed`), { exitCode: r.status ?? 1 });
}

async function main() {
  const npx = 'npx';
  fs.rmSync(BUILD_DIR, { recursive: true, force: true });
  run('type check, and build for the child processes', npx, ['tsc', '-p', 'tsconfig.json', '--outDir', BUILD_DIR, '--declaration', 'false', '--sourceMap', 'false']);
  run('lint', npx, ['eslint', '.']);
  const services = await ensureServices(`test-${process.pid}`, { ephemeral: true });
  const env = { ...process.env, ...services.env, TEST_BUILD_DIR: BUILD_DIR };
  try {
    // --forceExit: a BullMQ or ioredis handle left by a failing test must not hang CI; Jest still reports it.
    run('jest (NestJS 11)', npx, ['jest', '--forceExit', ...process.argv.slice(2)], { env });
    run('core suites through PgBouncer (transaction pooling)', npx, ['jest', '--config', path.join('compat', 'pgbouncer', 'jest.config.js'), '--forceExit'], { env });
    const compat = path.join(ROOT, 'compat', 'nest12');
    run('install NestJS 12 for the compatibility suite', 'npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: compat, env });
    run('build for NestJS 12', npx, ['tsc', '-p', path.join('compat', 'nest12', 'tsconfig.json')], { env });
    run('NestJS 12 compatibility suite', 'npm', ['test'], { cwd: compat, env });
    for (const set of PEER_SETS) {
      const dir = path.join(ROOT, 'compat', 'peers', set);
      run(`install peer set "${set}"`, 'npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: dir, env });
      run(`core suites on peer set "${set}"`, npx, ['jest', '--config', path.join('compat', 'peers', 'jest.config.js'), '--forceExit'], {
        env: { ...env, COMPAT_PEERS: set },
      });
    }
  } finally {
    await services.stop();
  }
}

main().catch((err) => {
  process.stderr.write(`[test] ${err.message}\n`);
  process.exit(err.exitCode ?? 1);
});
