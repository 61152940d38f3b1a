'use strict';
// `npm test`: type check (which also writes the compiled copy the suites' child processes run) and lint, while the
// compatibility folders install (lines prefixed "[install]"); then two streams at once, both against one Postgres and
// one Redis that this script starts on 127.0.0.1 (unless DATABASE_URL and REDIS_URL are set) and stops at the end:
// - the Jest suites (NestJS 11), two suites at a time;
// - lines prefixed "[compat]": the core suites through PgBouncer in transaction pooling (compat/pgbouncer), the
//   NestJS 12 suite, the peer-version suites (compat/peers: the oldest and newest typeorm, bullmq and ioredis the
//   package accepts, and the oldest pg), one suite at a time, then the chaos run (`npm run chaos -- --profile ci`,
//   which starts its own Postgres and Redis because it restarts them).
// Every suite works in its own schema and Redis key prefix, so the streams do not see each other's data. Much of a
// suite's time is spent waiting (leases, restarts, child processes), so on the 2-core CI machine the streams overlap
// well. Arguments are passed to the first Jest run only (e.g. one suite's path).
const { spawn } = require('node:child_process');
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

/** Writes a child's output as whole lines, each after `prefix`, so two streams interleave by line. */
function lineWriter(prefix) {
  let pending = '';
  const writer = (chunk) => {
    pending += chunk;
    const lines = pending.split('\n');
    pending = lines.pop();
    if (lines.length > 0) process.stdout.write(lines.map((line) => `${prefix}${line}\n`).join(''));
  };
  writer.flush = () => {
    if (pending) process.stdout.write(`${prefix}${pending}\n`);
    pending = '';
  };
  return writer;
}

/** Runs one step and resolves when it exits 0; rejects with its exit code otherwise. */
function run(label, cmd, args, { prefix = '', ...options } = {}) {
  const say = (text) => process.stdout.write(`${prefix}[test] ${text}\n`);
  say(`${label}: ${cmd} ${args.join(' ')}`);
  const started = Date.now();
  return new Promise((resolve, reject) => {
    // Unprefixed steps keep the terminal (Jest's colours and progress); prefixed ones are read line by line.
    const child = spawn(cmd, args, { cwd: ROOT, stdio: prefix ? ['ignore', 'pipe', 'pipe'] : 'inherit', ...options });
    const writers = [child.stdout, child.stderr].filter(Boolean).map((stream) => {
      stream.setEncoding('utf8');
      const write = lineWriter(prefix);
      stream.on('data', write);
      return write;
    });
    child.on('error', (err) => reject(Object.assign(err, { exitCode: 1 })));
    child.on('close', (code, signal) => {
      for (const write of writers) write.flush();
      const seconds = Math.round((Date.now() - started) / 1000);
      say(`${label}: ${code === 0 ? 'done' : `failed (${signal ?? `exit ${code}`})`} in ${seconds} s`);
      if (code === 0) resolve();
      else reject(Object.assign(new Error(`${label} failed`), { exitCode: code ?? 1 }));
    });
  });
}

const INSTALL = ['ci', '--no-audit', '--no-fund', '--loglevel=error'];

/**
 * Installs what the compatibility runs need (NestJS 12, the peer sets), one after the other, with `[install]` before
 * each line: mostly download and disk, so it runs beside the type check and the lint.
 */
async function installCompatibilityFolders() {
  const prefix = '[install] ';
  await run('install NestJS 12 for the compatibility suite', 'npm', INSTALL, { prefix, cwd: path.join(ROOT, 'compat', 'nest12') });
  for (const set of PEER_SETS) {
    await run(`install peer set "${set}"`, 'npm', INSTALL, { prefix, cwd: path.join(ROOT, 'compat', 'peers', set) });
  }
}

/** The compatibility runs and the chaos run, one after the other; `[compat]` before each line. */
async function compatibilityStream(env, installed) {
  const prefix = '[compat] ';
  const jest = (label, config, extraEnv = {}) =>
    run(label, 'npx', ['jest', '--config', config, '--forceExit', '--maxWorkers=1'], { prefix, env: { ...env, ...extraEnv } });

  await jest('core suites through PgBouncer (transaction pooling)', path.join('compat', 'pgbouncer', 'jest.config.js'));
  await installed;
  await run('build for NestJS 12', 'npx', ['tsc', '-p', path.join('compat', 'nest12', 'tsconfig.json')], { prefix, env });
  await run('NestJS 12 compatibility suite', 'npm', ['test'], { prefix, cwd: path.join(ROOT, 'compat', 'nest12'), env });
  for (const set of PEER_SETS) {
    await jest(`core suites on peer set "${set}"`, path.join('compat', 'peers', 'jest.config.js'), { COMPAT_PEERS: set });
  }
  // Faults on real processes (SIGKILLed app instances, Redis restarted empty and flushed, Postgres restarted), counted
  // from ledgers; fails when an invariant breaks (README "Reliability under faults").
  await run('chaos (profile ci)', 'npm', ['run', 'chaos', '--', '--profile', 'ci'], { prefix, env });
}

/** Settles every stream, then rethrows the first failure: a failing stream never cuts the other one short. */
async function allOf(streams) {
  const results = await Promise.allSettled(streams);
  const failed = results.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
}

async function main() {
  fs.rmSync(BUILD_DIR, { recursive: true, force: true });
  const installed = installCompatibilityFolders();
  installed.catch(() => undefined); // awaited by the compatibility stream, or below should anything fail before it
  let services;
  try {
    await run('type check, and build for the child processes', 'npx', ['tsc', '-p', 'tsconfig.json', '--outDir', BUILD_DIR, '--declaration', 'false', '--sourceMap', 'false']);
    await run('lint', 'npx', ['eslint', '.']);
    services = await ensureServices(`test-${process.pid}`, { ephemeral: true });
  } catch (err) {
    await installed.catch(() => undefined); // no npm ci left running behind the exit
    throw err;
  }
  const env = { ...process.env, ...services.env, TEST_BUILD_DIR: BUILD_DIR };
  try {
    await allOf([
      // --forceExit: a BullMQ or ioredis handle left by a failing test must not hang CI; Jest still reports it.
      run('jest (NestJS 11)', 'npx', ['jest', '--forceExit', '--maxWorkers=2', ...process.argv.slice(2)], { env }),
      compatibilityStream(env, installed),
    ]);
  } finally {
    await services.stop();
  }
}

main().catch((err) => {
  process.stderr.write(`[test] ${err.message}\n`);
  process.exit(err.exitCode ?? 1);
});
