import { Body, Controller, Headers, INestApplication, Post } from '@nestjs/common';
import Redis from 'ioredis';
import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import request from 'supertest';
import { IdempotencyService } from '../../lib';
import { gate, listen, redisKeys, sleep, waitUntil } from '../support/resilience';
import { ADAPTERS, createTestApp, redisUrl, sql, uniqueSchema } from '../support/test-app';
import { nodeEntry } from '../support/node-entry';

const ROOT = join(__dirname, '..', '..');
const FIXTURE = join(__dirname, 'fixtures', 'crash-app.ts');

/** A child Node process running fixtures/crash-app.ts. */
class CrashApp {
  readonly lines: string[] = [];
  private buffer = '';
  private stderr = '';

  private constructor(readonly proc: ChildProcess) {
    proc.stdout!.on('data', (chunk: Buffer) => {
      this.buffer += chunk.toString('utf8');
      const parts = this.buffer.split('\n');
      this.buffer = parts.pop() ?? '';
      this.lines.push(...parts);
    });
    proc.stderr!.on('data', (chunk: Buffer) => {
      this.stderr += chunk.toString('utf8');
    });
  }

  static async start(env: Record<string, string>): Promise<{ child: CrashApp; url: string }> {
    const proc = spawn(process.execPath, nodeEntry(FIXTURE), {
      cwd: ROOT,
      env: { ...process.env, TS_NODE_PROJECT: join(ROOT, 'tsconfig.json'), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const child = new CrashApp(proc);
    const line = await child.waitForLine('LISTENING ', 45_000);
    return { child, url: line.slice('LISTENING '.length) };
  }

  waitForLine(prefix: string, timeoutMs = 20_000): Promise<string> {
    return waitUntil(`the child prints "${prefix}"`, () => {
      if (this.proc.exitCode !== null) throw new Error(`child exited with ${this.proc.exitCode}: ${this.stderr}`);
      return this.lines.find((l) => l.startsWith(prefix));
    }, { timeoutMs, intervalMs: 25 });
  }

  async kill(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const exited = new Promise((resolve) => this.proc.once('exit', resolve));
    this.proc.kill('SIGKILL');
    await exited;
  }
}

let secondRuns = 0;

@Controller()
class SecondInstanceController {
  @Post('slow')
  slow(@Body() body: unknown) {
    secondRuns++;
    return { by: 'second', body };
  }
}

describe.each(ADAPTERS)('crash takeover of a process killed with SIGKILL (%s)', (adapter) => {
  const schema = uniqueSchema('crash');
  const prefix = `idem-${schema}`;
  let child: CrashApp | undefined;
  let childUrl: string;
  let app: INestApplication;
  let url: string;
  let probe: Redis;

  beforeAll(async () => {
    // A long lease: the dead holder's key must still be held when the test looks, however slow the machine is.
    ({ child, url: childUrl } = await CrashApp.start({
      IDEM_SCHEMA: schema, IDEM_PREFIX: prefix, IDEM_LOCK_TIMEOUT: '10s', IDEM_ADAPTER: adapter,
    }));
    // The second instance shares the schema and the Redis prefix; the child has applied the migrations.
    app = await createTestApp({ adapter, schema, controllers: [SecondInstanceController], options: { http: { lockTimeout: '2s' } } });
    url = await listen(app);
    probe = new Redis(redisUrl());
  }, 90_000);

  afterAll(async () => {
    await child?.kill();
    await app?.close();
    probe?.disconnect();
  });

  it('refuses the key while the dead holder\'s lease is live, then takes it over and runs', async () => {
    secondRuns = 0;
    const key = `crash-${adapter}`;
    const body = { amount: 42 };
    // The request to the child never gets an answer: the child dies mid-handler.
    const doomed = request(childUrl).post('/slow').set('Idempotency-Key', key).send(body).then(() => 'answered', () => 'connection lost');
    await child!.waitForLine(`STARTED ${key}`);
    await child!.kill();
    expect(child!.proc.signalCode).toBe('SIGKILL');
    expect(await doomed).toBe('connection lost');

    const [held] = await sql<{ status: string; live: boolean }>(
      `SELECT status, locked_until > now() AS live FROM "${schema}".idempotency_records WHERE key = $1`, [key],
    );
    expect(held).toEqual({ status: 'in_progress', live: true });

    const refused = await request(url).post('/slow').set('Idempotency-Key', key).send(body);
    expect(refused.status).toBe(409);
    expect(refused.headers['content-type']).toMatch(/application\/problem\+json/);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(secondRuns).toBe(0);

    // Once the lease has passed (Postgres) and the dead holder's in-flight marker is gone (Redis),
    // the next request takes the key over and runs. Nothing ends them but time: up to one lease (10 s).
    await waitUntil('the dead holder\'s lease passes', async () => {
      const [row] = await sql<{ passed: boolean }>(`SELECT locked_until <= now() AS passed FROM "${schema}".idempotency_records WHERE key = $1`, [key]);
      return row.passed;
    }, { timeoutMs: 30_000 });
    await waitUntil('the in-flight marker expires', async () => (await probe.exists(redisKeys(prefix, key).marker)) === 0, { timeoutMs: 30_000 });

    const takenOver = await request(url).post('/slow').set('Idempotency-Key', key).send(body);
    expect(takenOver.status).toBe(201);
    expect(takenOver.body).toEqual({ by: 'second', body });
    expect(takenOver.headers['idempotent-replayed']).toBeUndefined();
    expect(secondRuns).toBe(1);

    // Not stuck: completed by the new holder, replayed from now on.
    const replay = await request(url).post('/slow').set('Idempotency-Key', key).send(body);
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(takenOver.text);
    expect(secondRuns).toBe(1);
    const rows = await sql<{ status: string; attempts: number }>(`SELECT status, attempts FROM "${schema}".idempotency_records WHERE key = $1`, [key]);
    expect(rows).toEqual([{ status: 'completed', attempts: 2 }]);
  }, 120_000);
});

let longRuns = 0;
let longStarted = false;
const longGate = { current: gate() };

@Controller()
class LongController {
  @Post('long')
  async long(@Headers('idempotency-key') key: string) {
    longRuns++;
    longStarted = true;
    await longGate.current.promise;
    return { key, run: longRuns };
  }
}

describe.each(ADAPTERS)('lease extension (%s)', (adapter) => {
  const schema = uniqueSchema('lease');
  const prefix = `idem-${schema}`;
  let app: INestApplication;
  let url: string;
  let probe: Redis;

  beforeAll(async () => {
    // 3 s, renewed every second: the margin a loaded machine needs, still short enough to outlive a few times.
    app = await createTestApp({ adapter, schema, controllers: [LongController], options: { http: { lockTimeout: '3s' } } });
    url = await listen(app);
    probe = new Redis(redisUrl());
  });

  afterAll(async () => {
    longGate.current.open();
    await app?.close();
    probe?.disconnect();
  });

  it('a handler running longer than its lockTimeout keeps the key: duplicates get 409, it runs once', async () => {
    longRuns = 0;
    longStarted = false;
    longGate.current = gate();
    const key = `long-${adapter}`;
    const original = request(url).post('/long').set('Idempotency-Key', key).send({}).then((r) => r);
    await waitUntil('the handler started', () => longStarted);

    // Twice: wait (on the database's clock) until the lease as last seen would have ended had nobody renewed it,
    // then it must still be live. The first round is already past the lease the key was claimed with.
    let [{ until }] = await sql<{ until: string }>(`SELECT locked_until::text AS until FROM "${schema}".idempotency_records WHERE key = $1`, [key]);
    for (let round = 0; round < 2; round++) {
      const seen = until;
      await waitUntil('the lease last seen would have ended', async () => {
        const [r] = await sql<{ passed: boolean }>(`SELECT now() > $1::timestamptz AS passed`, [seen]);
        return r.passed;
      }, { timeoutMs: 30_000, intervalMs: 100 });
      // Drop the Redis marker so that Postgres, not the cache, answers the duplicate.
      await probe.del(redisKeys(prefix, key).marker);
      const [row] = await sql<{ live: boolean; attempts: number; until: string }>(
        `SELECT locked_until > now() AS live, attempts, locked_until::text AS until FROM "${schema}".idempotency_records WHERE key = $1`, [key],
      );
      expect({ live: row.live, attempts: row.attempts }).toEqual({ live: true, attempts: 1 });
      until = row.until;
      const duplicate = await request(url).post('/long').set('Idempotency-Key', key).send({});
      expect(duplicate.status).toBe(409);
      expect(longRuns).toBe(1);
    }

    longGate.current.open();
    const res = await original;
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ key, run: 1 });
    const replay = await request(url).post('/long').set('Idempotency-Key', key).send({});
    expect(replay.status).toBe(201);
    expect(replay.text).toBe(res.text);
    expect(longRuns).toBe(1);
  }, 90_000);
});

describe('a duplicate refused while Redis had lost the marker (dead holder, Redis flushed mid-lease)', () => {
  const schema = uniqueSchema('stale');
  const prefix = `idem-${schema}`;
  let app: INestApplication;
  let service: IdempotencyService;
  let probe: Redis;

  beforeAll(async () => {
    app = await createTestApp({ adapter: 'express', schema, controllers: [] });
    service = app.get(IdempotencyService);
    probe = new Redis(redisUrl());
  });

  afterAll(async () => {
    await app?.close();
    probe?.disconnect();
  });

  it('does not keep the key blocked after the holder\'s lease has passed (Postgres alone would hand it over)', async () => {
    const request = { scope: 'http:', key: 'stale-marker', fingerprint: 'fp', leaseMs: 6000, ttlMs: 60_000 };
    const holder = await service.begin(request);
    expect(holder.kind).toBe('acquired');
    // The holder dies (no keepAlive). Midway through its lease Redis loses the in-flight marker (flush, restart, eviction).
    // The pause is what the test measures against: a marker the duplicate below set for a whole lease of its own
    // would outlive the holder's lease by (at least) this long. The lease leaves ample room after it.
    await sleep(2000);
    await probe.del(redisKeys(prefix, request.key).marker);
    // A duplicate arrives: Postgres says in progress, so it is refused — correctly.
    const refused = await service.begin(request);
    expect(refused.kind).toBe('in_progress');
    // The holder's lease passes in Postgres.
    await waitUntil('the dead holder\'s lease passes', async () => {
      const [row] = await sql<{ passed: boolean }>(`SELECT locked_until <= now() AS passed FROM "${schema}".idempotency_records WHERE key = $1`, [request.key]);
      return row.passed;
    }, { timeoutMs: 30_000 });
    // Settle: Redis and Postgres expiry need not agree to the millisecond (under load, by a few hundred). Half the
    // pause above, so that a marker outliving the lease by the whole pause would still be there.
    await sleep(1000);
    // The key must now be claimable, as it would be from Postgres alone; a marker left by the refused duplicate must not block it.
    const next = await service.begin(request);
    expect(next.kind).toBe('acquired');
  }, 60_000);
});
