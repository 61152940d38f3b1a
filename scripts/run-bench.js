'use strict';
// Runs bench/<name>.bench.ts against Postgres and Redis: the environment's DATABASE_URL / REDIS_URL
// when set, else servers started under .data/bench and stopped afterwards. Exits with the bench's code.
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { ensureServices, ROOT } = require('./services');

async function main() {
  const name = process.argv[2];
  if (!name || !/^[\w-]+$/.test(name)) {
    process.stderr.write('usage: node scripts/run-bench.js <name>   (runs bench/<name>.bench.ts)\n');
    return 2;
  }
  const file = path.join(ROOT, 'bench', `${name}.bench.ts`);
  if (!fs.existsSync(file)) {
    process.stderr.write(`no such benchmark: ${path.relative(ROOT, file)}\n`);
    return 2;
  }

  const services = await ensureServices('bench');
  let child;
  const forward = (signal) => {
    if (child && child.exitCode === null) child.kill(signal);
  };
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  try {
    return await new Promise((resolve, reject) => {
      child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', file], {
        cwd: ROOT,
        stdio: 'inherit',
        env: { ...process.env, ...services.env },
      });
      child.once('error', reject);
      child.once('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
    });
  } finally {
    process.off('SIGINT', forward);
    process.off('SIGTERM', forward);
    await services.stop();
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`${err && err.stack ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
