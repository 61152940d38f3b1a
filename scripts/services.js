'use strict';
// Starts Postgres and Redis on 127.0.0.1 for the demo, the tests and the benchmarks,
// unless DATABASE_URL / REDIS_URL are already set. Data lives under .data/ (ignored).
const { spawn, spawnSync, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
const DATA = path.join(ROOT, '.data');
const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

function log(msg) {
  process.stderr.write(`[services] ${msg}\n`);
}

function which(bin) {
  const r = spawnSync('sh', ['-c', `command -v ${bin}`], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

function findPostgresBin(name) {
  const onPath = which(name);
  if (onPath) return onPath;
  const base = '/usr/lib/postgresql';
  if (fs.existsSync(base)) {
    const versions = fs.readdirSync(base).sort((a, b) => Number(b) - Number(a));
    for (const v of versions) {
      const candidate = path.join(base, v, 'bin', name);
      if (fs.existsSync(candidate)) return candidate;
    }
  }
  return null;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function waitForPort(port, timeoutMs, proc, name) {
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const attempt = () => {
      if (proc && proc.exitCode !== null) {
        reject(new Error(`${name} exited with code ${proc.exitCode} before accepting connections`));
        return;
      }
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve();
      });
      socket.once('error', () => {
        socket.destroy();
        if (Date.now() > deadline) reject(new Error(`${name} did not accept connections on 127.0.0.1:${port} within ${timeoutMs} ms`));
        else setTimeout(attempt, 100);
      });
    };
    attempt();
  });
}

/** Runs a command as the unprivileged `postgres` user when we are root (initdb refuses root). */
function asPgUser(cmd, args) {
  if (!isRoot) return { cmd, args };
  return { cmd: 'runuser', args: ['-u', 'postgres', '--', cmd, ...args] };
}

function ensureTraversable(dir) {
  // The postgres user must be able to reach the data folder inside the project.
  let current = dir;
  while (current !== path.dirname(current)) {
    const st = fs.statSync(current);
    if ((st.mode & 0o001) === 0) {
      fs.chmodSync(current, st.mode | 0o001);
      log(`made ${current} traversable (o+x) so the postgres user can reach .data/`);
    }
    current = path.dirname(current);
  }
}

/** Starts Postgres with its data under .data/<name>/pg, on `fixedPort` when given (to restart it at the same address). */
async function startPostgres(name, fixedPort) {
  const initdb = findPostgresBin('initdb');
  const postgres = findPostgresBin('postgres');
  if (!initdb || !postgres) {
    throw new Error('Postgres binaries not found: install the "postgresql" package (apt-get install -y postgresql) or set DATABASE_URL.');
  }
  if (isRoot && spawnSync('id', ['postgres']).status !== 0) {
    throw new Error('Running as root needs a "postgres" system user for initdb: install the "postgresql" package or set DATABASE_URL.');
  }
  const dir = path.join(DATA, name, 'pg');
  fs.mkdirSync(path.dirname(dir), { recursive: true });
  if (isRoot) ensureTraversable(path.dirname(dir));
  if (!fs.existsSync(path.join(dir, 'PG_VERSION'))) {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir, { recursive: true });
    if (isRoot) execFileSync('chown', ['-R', 'postgres', path.dirname(dir)]);
    const { cmd, args } = asPgUser(initdb, ['-D', dir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-locale']);
    const r = spawnSync(cmd, args, { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`initdb failed: ${r.stderr || r.stdout}`);
  }
  const port = fixedPort || (await freePort());
  const { cmd, args } = asPgUser(postgres, [
    '-D', dir, '-p', String(port),
    '-c', 'listen_addresses=127.0.0.1',
    '-c', 'unix_socket_directories=',
    '-c', 'max_connections=300',
  ]);
  const proc = spawn(cmd, args, { stdio: ['ignore', 'ignore', fs.openSync(path.join(DATA, name, 'postgres.log'), 'a')] });
  await waitForPort(port, 30000, proc, 'postgres');
  // TCP accepts before recovery finishes; wait until a query works.
  const { Client } = require('pg');
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const deadline = Date.now() + 30000;
  for (;;) {
    const client = new Client({ connectionString: url });
    try {
      await client.connect();
      // The port was free when chosen, not when the server bound it: make sure this is the server we started.
      const { rows } = await client.query('SHOW data_directory');
      await client.end();
      if (path.resolve(rows[0].data_directory) !== path.resolve(dir)) {
        throw Object.assign(new Error(`another Postgres (${rows[0].data_directory}) took port ${port} before ours bound it`), { portTaken: true });
      }
      break;
    } catch (err) {
      await client.end().catch(() => undefined);
      if (err.portTaken) {
        await stop(proc, 'SIGINT'); // ours could not bind, so it is exiting on its own
        if (fixedPort) throw err;
        return startPostgres(name);
      }
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  return { url, proc };
}

function ensureRedisServer() {
  let bin = which('redis-server');
  if (bin) return bin;
  if (!isRoot) {
    throw new Error('redis-server not found: install the "redis-server" package (sudo apt-get install -y redis-server) or set REDIS_URL.');
  }
  log('redis-server not found; installing the redis-server package with apt-get');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
  execFileSync('apt-get', ['install', '-y', '-qq', 'redis-server'], { stdio: 'inherit', env });
  bin = which('redis-server');
  if (!bin) throw new Error('apt-get installed redis-server but it is not on PATH');
  return bin;
}

/** Starts a redis-server on the given (or a free) port; used by tests that stop and restart Redis too. */
async function startRedis(name, fixedPort) {
  const bin = ensureRedisServer();
  const port = fixedPort || (await freePort());
  const dir = path.join(DATA, name, 'redis');
  fs.mkdirSync(dir, { recursive: true });
  const proc = spawn(bin, [
    '--port', String(port), '--bind', '127.0.0.1', '--dir', dir,
    '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--protected-mode', 'no',
  ], { stdio: ['ignore', 'ignore', 'ignore'] });
  await waitForPort(port, 15000, proc, 'redis-server');
  // The port was free when chosen, not when the server bound it: make sure this is the server we started.
  const Redis = require('ioredis');
  const probe = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  let servedDir;
  try {
    await probe.connect();
    servedDir = (await probe.config('GET', 'dir'))[1];
  } finally {
    probe.disconnect();
  }
  if (path.resolve(servedDir) !== path.resolve(dir)) {
    await stop(proc);
    if (fixedPort) throw new Error(`another redis-server (${servedDir}) took port ${port} before ours bound it`);
    return startRedis(name);
  }
  return { url: `redis://127.0.0.1:${port}`, port, proc };
}

/**
 * Starts a Redis Cluster of `masters` redis-server processes (no replicas) on free loopback ports, data under
 * .data/<name>/cluster, and waits until every node reports cluster_state:ok. Returns { nodes, procs }; stop each
 * proc with stop() (by PID).
 */
async function startRedisCluster(name, masters = 3) {
  const bin = ensureRedisServer();
  const cli = which('redis-cli');
  if (!cli) throw new Error('redis-cli not found: install the "redis-tools" (or "redis-server") package');
  const dir = path.join(DATA, name, 'cluster');
  fs.rmSync(dir, { recursive: true, force: true });
  const procs = [];
  const nodes = [];
  try {
    for (let i = 0; i < masters; i++) {
      const port = await freePort();
      const nodeDir = path.join(dir, String(port));
      fs.mkdirSync(nodeDir, { recursive: true });
      const proc = spawn(bin, [
        '--port', String(port), '--bind', '127.0.0.1', '--dir', nodeDir,
        '--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '5000',
        '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--protected-mode', 'no',
      ], { stdio: ['ignore', 'ignore', 'ignore'] });
      procs.push(proc);
      await waitForPort(port, 15000, proc, 'redis-server (cluster)');
      nodes.push({ host: '127.0.0.1', port });
    }
    const created = spawnSync(cli, ['--cluster', 'create', ...nodes.map((n) => `${n.host}:${n.port}`), '--cluster-replicas', '0', '--cluster-yes'], {
      encoding: 'utf8',
      timeout: 60000,
    });
    if (created.status !== 0) throw new Error(`redis-cli --cluster create failed: ${created.stderr || created.stdout}`);
    const deadline = Date.now() + 30000;
    for (const node of nodes) {
      for (;;) {
        const info = spawnSync(cli, ['-h', node.host, '-p', String(node.port), 'cluster', 'info'], { encoding: 'utf8', timeout: 5000 });
        if (/cluster_state:ok/.test(info.stdout || '')) break;
        if (Date.now() > deadline) throw new Error(`the Redis Cluster on ${node.port} did not reach cluster_state:ok: ${info.stdout}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  } catch (err) {
    await Promise.all(procs.map((p) => stop(p)));
    throw err;
  }
  return { nodes, procs };
}

function ensurePgBouncer() {
  let bin = which('pgbouncer') || (fs.existsSync('/usr/sbin/pgbouncer') ? '/usr/sbin/pgbouncer' : null);
  if (bin) return bin;
  if (!isRoot) throw new Error('pgbouncer not found: install the "pgbouncer" package (sudo apt-get install -y pgbouncer).');
  log('pgbouncer not found; installing the pgbouncer package with apt-get');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
  execFileSync('apt-get', ['install', '-y', '-qq', 'pgbouncer'], { stdio: 'inherit', env });
  bin = which('pgbouncer') || (fs.existsSync('/usr/sbin/pgbouncer') ? '/usr/sbin/pgbouncer' : null);
  if (!bin) throw new Error('apt-get installed pgbouncer but it is not found');
  return bin;
}

/**
 * Starts PgBouncer in transaction pooling in front of the Postgres at `postgresUrl` (trust auth, loopback only,
 * a free port, config and log under .data/<name>/pgbouncer). Returns the URL to connect through it.
 */
async function startPgBouncer(name, postgresUrl, { poolSize = 20 } = {}) {
  const bin = ensurePgBouncer();
  const target = new URL(postgresUrl);
  const port = await freePort();
  const dir = path.join(DATA, name, 'pgbouncer');
  fs.mkdirSync(dir, { recursive: true });
  const user = decodeURIComponent(target.username || 'postgres');
  fs.writeFileSync(path.join(dir, 'userlist.txt'), `"${user}" ""\n`);
  fs.writeFileSync(path.join(dir, 'pgbouncer.ini'), [
    '[databases]',
    `* = host=${target.hostname} port=${target.port || 5432}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = trust',
    `auth_file = ${path.join(dir, 'userlist.txt')}`,
    'pool_mode = transaction',
    'max_client_conn = 1000',
    `default_pool_size = ${poolSize}`,
    'ignore_startup_parameters = extra_float_digits,options,application_name',
    `logfile = ${path.join(dir, 'pgbouncer.log')}`,
    `pidfile = ${path.join(dir, 'pgbouncer.pid')}`,
    '',
  ].join('\n'));
  // pgbouncer refuses to run as root: run it as the postgres user, which must own its folder.
  if (isRoot) {
    ensureTraversable(dir);
    execFileSync('chown', ['-R', 'postgres', dir]);
  }
  const { cmd, args } = asPgUser(bin, [path.join(dir, 'pgbouncer.ini')]);
  const proc = spawn(cmd, args, { stdio: ['ignore', 'ignore', fs.openSync(path.join(dir, 'stderr.log'), 'a')] });
  await waitForPort(port, 15000, proc, 'pgbouncer');
  target.hostname = '127.0.0.1';
  target.port = String(port);
  return { url: target.toString(), port, proc, pidFile: path.join(dir, 'pgbouncer.pid') };
}

/** Stops a PgBouncer started by startPgBouncer (by the PID in its pid file: runuser does not forward signals) and removes its folder. */
async function stopPgBouncer(bouncer) {
  if (!bouncer) return;
  let pid;
  try {
    pid = Number(fs.readFileSync(bouncer.pidFile, 'utf8').trim());
  } catch {
    pid = undefined;
  }
  if (pid && Number.isInteger(pid) && pid > 0) {
    try {
      process.kill(pid, 'SIGINT'); // shut down at once, closing client and server connections
    } catch {
      // already gone
    }
  }
  await stop(bouncer.proc, 'SIGINT');
  const dir = path.dirname(bouncer.pidFile);
  fs.rmSync(dir, { recursive: true, force: true });
  if (fs.readdirSync(path.dirname(dir)).length === 0) fs.rmdirSync(path.dirname(dir));
}

function stop(proc, signal = 'SIGTERM') {
  return new Promise((resolve) => {
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return resolve();
    const timer = setTimeout(() => proc.kill('SIGKILL'), 10000);
    proc.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    proc.kill(signal);
  });
}

/**
 * Ensures DATABASE_URL and REDIS_URL: uses the environment's when set, else starts local servers.
 * Returns { env, stop } where stop() ends only what was started here.
 */
async function ensureServices(name, { ephemeral = false } = {}) {
  const started = [];
  const env = {};
  try {
    if (process.env.DATABASE_URL) {
      env.DATABASE_URL = process.env.DATABASE_URL;
    } else {
      const pg = await startPostgres(name);
      started.push(pg.proc);
      env.DATABASE_URL = pg.url;
      log(`postgres on ${pg.url}`);
    }
    if (process.env.REDIS_URL) {
      env.REDIS_URL = process.env.REDIS_URL;
    } else {
      const redis = await startRedis(name);
      started.push(redis.proc);
      env.REDIS_URL = redis.url;
      log(`redis on ${redis.url}`);
    }
  } catch (err) {
    await Promise.all(started.map((p) => stop(p)));
    throw err;
  }
  return {
    env,
    stop: async () => {
      await Promise.all(started.map((p) => stop(p)));
      if (ephemeral && started.length > 0) fs.rmSync(path.join(DATA, name), { recursive: true, force: true });
    },
  };
}

module.exports = { ensureServices, startRedis, startRedisCluster, startPostgres, startPgBouncer, stopPgBouncer, stop, freePort, ROOT };
