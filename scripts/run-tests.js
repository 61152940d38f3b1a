'use strict';
// `npm test`: type check and lint, then the Jest suites (NestJS 11), the core suites again through PgBouncer in
// transaction pooling (compat/pgbouncer), the NestJS 12 compatibility suite and the
// peer-version suites (compat/peers: the oldest and newest typeorm, bullmq and ioredis the package accepts),
// all against one Postgres and one Redis that this script starts on 127.0.0.1 (unless DATABASE_URL and
// REDIS_URL are set) and stops at the end.
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const { ensureServices, ROOT } = require('./services');

/** Folders of compat/peers, each pinning one combination of typeorm, bullmq and ioredis (see compat/peers/README.md). */
const PEER_SETS = ['oldest', 'v5-latest', 'v6-oldest'];

function run(label, cmd, args, options = {}) {
  process.stdout.write(`\n[test] ${label}: ${cmd} ${args.join(' ')}\n`);
  const r = spawnSync(cmd, args, { cwd: ROOT, stdio: 'inherit', ...options });
  if (r.status !== 0) throw Object.assign(new Error(`${label} failed`), { exitCode: r.status ?? 1 });
}

async function main() {
  const npx = 'npx';
  run('type check', npx, ['tsc', '-p', 'tsconfig.json', '--noEmit']);
  run('lint', npx, ['eslint', '.']);
  const services = await ensureServices(`test-${process.pid}`, { ephemeral: true });
  const env = { ...process.env, ...services.env };
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
