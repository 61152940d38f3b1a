import { INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { BeginResult, ClaimRequest, IdempotencyModule, IdempotencyService } from '../../lib';
import { waitUntil } from '../support/resilience';
import { databaseUrl, redisUrl, sql, uniqueSchema } from '../support/test-app';
import { CaptureService } from './fixtures/captures';
import { nodeEntry } from '../support/node-entry';

const ROOT = join(__dirname, '..', '..');

/** Another instance of the app in its own process (fixtures/capture-worker.ts), driven through stdin. */
class Worker {
  readonly proc: ChildProcess;
  readonly lines: string[] = [];
  readonly exited: Promise<unknown>;

  constructor(schema: string) {
    this.proc = spawn(process.execPath, nodeEntry(join(__dirname, 'fixtures', 'capture-worker.ts')), {
      cwd: ROOT,
      env: { ...process.env, TEST_SCHEMA: schema, DATABASE_URL: databaseUrl(), REDIS_URL: redisUrl(), TS_NODE_PROJECT: join(ROOT, 'tsconfig.json') },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    createInterface({ input: this.proc.stdout! }).on('line', (line) => this.lines.push(line));
    this.exited = new Promise((resolve) => this.proc.once('exit', resolve));
  }

  send(line: string): void {
    this.proc.stdin!.write(`${line}\n`);
  }

  line(text: string): Promise<string> {
    return waitUntil(`the worker printed "${text}" (output: ${this.lines.join(' | ')})`, () => this.lines.find((l) => l === text), { timeoutMs: 60_000, intervalMs: 5 });
  }

  async kill(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.proc.kill('SIGKILL');
    await this.exited;
  }
}

describe('@IdempotentMethod onDuplicate "wait" across instances', () => {
  const schema = uniqueSchema('waitcrash');
  let app: INestApplicationContext;
  let service: CaptureService;
  let worker: Worker;
  /** The keys for which a begin() of this process found the key held by another caller. */
  const foundBusy = new Set<string>();

  const runs = async (id: string): Promise<string[]> =>
    (await sql<{ label: string }>(`SELECT label FROM "${schema}".runs WHERE label LIKE $1 ORDER BY id`, [`${id}:%`])).map((r) => r.label);

  beforeAll(async () => {
    await sql(`CREATE SCHEMA "${schema}"; CREATE TABLE "${schema}".runs (id serial PRIMARY KEY, label text NOT NULL)`);
    CaptureService.schema = schema;
    @Module({
      imports: [IdempotencyModule.forRoot({ postgres: { url: databaseUrl(), schema }, redis: { url: redisUrl(), keyPrefix: schema }, migrationsRun: true })],
      providers: [CaptureService],
    })
    class AppModule {}
    app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    service = app.get(CaptureService);
    const engine = app.get(IdempotencyService);
    const begin = engine.begin.bind(engine);
    jest.spyOn(engine, 'begin').mockImplementation(async (request: ClaimRequest): Promise<BeginResult> => {
      const result = await begin(request);
      if (result.kind === 'in_progress') foundBusy.add(request.key);
      return result;
    });
    worker = new Worker(schema);
    await worker.line('ready');
  }, 60_000);

  afterAll(async () => {
    await worker.kill();
    await service.pool.end();
    await app.close();
  });

  it('a waiter gets the failure of the run it waited for', async () => {
    worker.send('run k-failed fail-on-release');
    await worker.line('inside k-failed');
    const waiter = service.capture('k-failed', 'succeed');
    await waitUntil('the waiter found the key held', () => foundBusy.has('CaptureService.capture:k-failed'));
    worker.send('release');
    await expect(waiter).rejects.toMatchObject({ name: 'StoredFailureError', message: 'capture k-failed declined' });
    expect(await runs('k-failed')).toEqual(['k-failed:fail-on-release']);
  });

  it('a waiter whose holder was killed runs itself, never rethrowing an older failure', async () => {
    // 1. A first call fails and releases the key.
    await expect(service.capture('k-crash', 'fail')).rejects.toThrow('capture k-crash declined');
    // 2. A retry on another instance takes the key and is killed while it holds it.
    worker.send('run k-crash hang');
    await worker.line('inside k-crash');
    // 3. A third call waits for that retry; once its lease lapses the waiter must run, not report call 1's failure.
    const waiter = service.capture('k-crash', 'succeed');
    await waitUntil('the waiter found the key held', () => foundBusy.has('CaptureService.capture:k-crash'));
    await worker.kill();
    await expect(waiter).resolves.toBe('captured-k-crash');
    expect(await runs('k-crash')).toEqual(['k-crash:fail', 'k-crash:hang', 'k-crash:succeed']);
    expect(await service.capture('k-crash', 'fail')).toBe('captured-k-crash');
  });
});
