import { ChildProcess, execFile, spawn } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { databaseUrl, sql, uniqueSchema } from '../support/test-app';

/**
 * The adoption check of issue 7, automated: the package as `npm pack` ships it, installed into a folder outside the
 * repository (no registry: the tarball has no dependencies, the peers are linked from this repository's
 * node_modules, and ioredis and bullmq are left out), its bin migrating a schema, a consumer type-checking against
 * its declarations, and a small app (fixtures/packed-app.js) using it the way the README says.
 */
const ROOT = join(__dirname, '..', '..');
const PEERS = [
  '@nestjs/common', '@nestjs/core', '@nestjs/platform-express', '@nestjs/typeorm', '@types/node',
  'class-transformer', 'pg', 'reflect-metadata', 'rxjs', 'typeorm',
];

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** npm settings of an enclosing `npm test` must not leak into the nested npm. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) if (!/^npm_/i.test(name) && name !== 'NODE_PATH') env[name] = value;
  return { ...env, ...extra };
}

function run(cmd: string, args: string[], cwd: string, env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd, env: cleanEnv(env), maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
    });
  });
}

async function mustRun(cmd: string, args: string[], cwd: string): Promise<void> {
  const result = await run(cmd, args, cwd);
  if (result.code !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${result.code}:\n${result.stdout}\n${result.stderr}`);
}

/** Builds the library into a staging folder (not the repo's dist/), packs it and installs the tarball into `app`. */
async function packAndInstall(work: string): Promise<string> {
  const stage = join(work, 'stage');
  const app = join(work, 'app');
  mkdirSync(stage);
  mkdirSync(app);
  // Built where it is packed, as `npm pack` in the repository does: the source maps name the shipped sources.
  for (const dir of ['lib', 'migrations']) cpSync(join(ROOT, dir), join(stage, dir), { recursive: true });
  for (const file of ['package.json', 'README.md', 'LICENSE', 'tsconfig.json', 'tsconfig.build.json']) copyFileSync(join(ROOT, file), join(stage, file));
  symlinkSync(join(ROOT, 'node_modules'), join(stage, 'node_modules'), 'dir');
  await mustRun(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'], stage);
  await mustRun('npm', ['pack', stage, '--pack-destination', work, '--silent', '--ignore-scripts'], work);
  const tarball = readdirSync(work).find((file) => file.endsWith('.tgz'));
  if (!tarball) throw new Error(`npm pack left no tarball in ${work}`);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'adopter-app', version: '1.0.0', private: true }));
  await mustRun('npm', [
    'install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', '--legacy-peer-deps', '--no-package-lock', '--loglevel=error',
    join(work, tarball),
  ], app);
  for (const peer of PEERS) {
    mkdirSync(dirname(join(app, 'node_modules', peer)), { recursive: true });
    symlinkSync(join(ROOT, 'node_modules', peer), join(app, 'node_modules', peer), 'dir');
  }
  copyFileSync(join(__dirname, 'fixtures', 'packed-app.js'), join(app, 'main.js'));
  return app;
}

/** Starts the app in its own process and resolves with its URL once it listens. */
interface StartedApp {
  child: ChildProcess;
  url: string;
  /** Everything the process printed so far. */
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function startApp(app: string, schema: string): Promise<StartedApp> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['main.js'], { cwd: app, env: cleanEnv({ DATABASE_URL: databaseUrl(), APP_SCHEMA: schema }) });
    let output = '';
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => {
      child.on('exit', (code, signal) => {
        done({ code, signal });
        reject(new Error(`the app exited (${code ?? signal}) before listening:\n${output}`));
      });
    });
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const match = /LISTENING (\S+)/.exec(output);
      if (match) resolve({ child, url: match[1], output: () => output, exited });
    });
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  });
}

async function post(url: string, body: unknown, key?: string): Promise<{ status: number; headers: Headers; text: string }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (key) headers['idempotency-key'] = key;
  const response = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: response.status, headers: response.headers, text: await response.text() };
}

describe('adoption: the packed package installed in an app outside the repository', () => {
  let work: string;
  let app: string;
  const schemas: string[] = [];
  const fresh = async () => {
    const schema = uniqueSchema('adopt');
    schemas.push(schema);
    await sql(`CREATE SCHEMA "${schema}"`);
    return schema;
  };

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'idem-adoption-'));
    app = await packAndInstall(work);
  }, 300_000); // a build, a pack and an install on a loaded machine; this bounds a hang only

  afterAll(async () => {
    if (work) rmSync(work, { recursive: true, force: true });
    for (const schema of schemas) await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });

  it('ships a bin that migrates: --check lists what is pending (exit 1), migrate applies, --check passes', async () => {
    const schema = await fresh();
    const bin = join(app, 'node_modules', '.bin', 'nestjs-idempotency');
    const env = { DATABASE_URL: databaseUrl() };
    const before = await run(bin, ['migrate', '--check', '--schema', schema], app, env);
    expect([before.code, before.stderr]).toEqual([1, expect.stringContaining('CreateIdempotencyRecords1732250000000')]);
    expect(await run(bin, ['migrate', '--schema', schema], app, env)).toMatchObject({ code: 0, stdout: expect.stringContaining(`applied to schema "${schema}"`) });
    expect(await run(bin, ['migrate', '--check', '--schema', schema], app, env)).toMatchObject({ code: 0, stdout: `schema "${schema}" is up to date\n` });
  });

  it('exits 3, not the 1 of "pending migrations", when Postgres cannot be reached', async () => {
    const bin = join(app, 'node_modules', '.bin', 'nestjs-idempotency');
    // Port 1 on loopback: nothing listens there, the connection is refused at once.
    const unreachable = await run(bin, ['migrate', '--check'], app, { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/postgres' });
    expect([unreachable.code, unreachable.stderr]).toEqual([3, expect.stringContaining('ECONNREFUSED')]);
  });

  it('ships the sources its source maps name, so stack traces and debuggers point to files that exist; no specs', () => {
    const pkg = join(app, 'node_modules', 'nestjs-idempotency');
    for (const map of ['dist/lib/http/handler-start.js.map', 'dist/migrations/1732250000000-create-idempotency-records.js.map']) {
      const { sources } = JSON.parse(readFileSync(join(pkg, map), 'utf8')) as { sources: string[] };
      for (const source of sources) expect([source, existsSync(join(pkg, dirname(map), source))]).toEqual([source, true]);
    }
    expect(existsSync(join(pkg, 'lib', 'utils', 'duration.spec.ts'))).toBe(false);
  });

  it('type-checks a consumer against the shipped declarations', async () => {
    writeFileSync(join(app, 'consumer.ts'), [
      "import { IDEMPOTENCY_MIGRATIONS, IdempotencyInterceptor, IdempotencyModule, IdempotencyTestingModule, type IdempotencyModuleOptions } from 'nestjs-idempotency';",
      "const options: IdempotencyModuleOptions = { postgres: { dataSource: 'default' }, redis: false, http: { global: false } };",
      'export const parts = [IdempotencyModule.forRoot(options), IdempotencyInterceptor, IDEMPOTENCY_MIGRATIONS.length, IdempotencyTestingModule.forRoot()];',
    ].join('\n'));
    const tsc = await run(process.execPath, [
      join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '--noEmit', '--strict', '--skipLibCheck', '--experimentalDecorators',
      '--module', 'commonjs', '--moduleResolution', 'node', '--target', 'es2022', '--types', 'node', 'consumer.ts',
    ], app);
    expect(tsc).toMatchObject({ code: 0, stdout: '' });
  });

  it('runs the README\'s setup: DataSource reuse, redis: false without ioredis or bullmq, @UseInterceptors, a serializer, a filter', async () => {
    const schema = await fresh();
    expect((await run(join(app, 'node_modules', '.bin', 'nestjs-idempotency'), ['migrate', '--schema', schema], app, { DATABASE_URL: databaseUrl() })).code).toBe(0);
    const { child, url, output, exited } = await startApp(app, schema);
    try {
      const body = { email: 'a@example.com', password: 'secret' };
      const first = await post(`${url}/users`, body, 'adopt-1');
      const retry = await post(`${url}/users`, body, 'adopt-1');
      expect([first.status, first.text, first.headers.get('idempotent-replayed')]).toEqual([201, '{"id":1,"email":"a@example.com"}', null]);
      // The @Exclude()d passwordHash stays hidden on the replay: what is stored is what went on the wire.
      expect([retry.status, retry.text, retry.headers.get('idempotent-replayed')]).toEqual([201, first.text, 'true']);

      const noKey = await post(`${url}/users`, body);
      expect([noKey.status, JSON.parse(noKey.text)]).toEqual([400, { code: 'HTTP_MISSING_KEY', message: expect.stringMatching(/idempotency-key/i) }]);
      expect((await post(`${url}/invoices`, { orderId: 'o-1' })).status).toBe(201);
      const duplicate = await post(`${url}/invoices`, { orderId: 'o-1' });
      expect([duplicate.status, JSON.parse(duplicate.text)]).toEqual([409, { code: 'DUPLICATE_EXECUTION', message: expect.stringContaining('InvoiceService.issue') }]);

      const loaded = await fetch(`${url}/invoices/loaded-peers`);
      expect(await loaded.json()).toEqual([]);
      expect(await sql(`SELECT count(*)::int AS n FROM "${schema}".idempotency_records`)).toEqual([{ n: 2 }]);
    } finally {
      child.kill('SIGTERM');
    }
    // app.enableShutdownHooks(): SIGTERM runs the shutdown (the module closes what it owns, leaves the borrowed
    // DataSource to TypeORM), then Nest re-raises the signal; nothing was logged as an error or a warning.
    expect(await exited).toEqual({ code: null, signal: 'SIGTERM' });
    expect(output().split('\n').filter((line) => line && !line.startsWith('LISTENING'))).toEqual(['SHUTDOWN SIGTERM']);
  });
});
