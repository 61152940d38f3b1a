// Issue 8, behaviours 1 and 3 over HTTP: an app killed with SIGKILL after the handler wrote and before the commit leaves
// nothing, not even its claim: the retry (on another instance) runs at once, without waiting for the dead app's
// lease (an hour), and once; one ledger row in the end.
import { Controller, Headers, INestApplication, Post } from '@nestjs/common';
import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import request from 'supertest';
import { currentTransaction, Idempotent } from '../../lib';
import { listen, waitUntil } from '../support/resilience';
import { ADAPTERS, createTestApp, databaseUrl, redisUrl, sql, uniqueSchema } from '../support/test-app';
import { nodeEntry } from '../support/node-entry';

jest.setTimeout(120_000);

const ROOT = join(__dirname, '..', '..');
let ledgerTable = '';

@Controller()
class ChargeController {
  @Post('charges')
  @Idempotent({ transaction: true })
  async charge(@Headers('idempotency-key') key: string): Promise<{ charged: string }> {
    await currentTransaction().query(`INSERT INTO ${ledgerTable} (charge_id) VALUES ($1)`, [key]);
    return { charged: key };
  }
}

describe.each(ADAPTERS)('transactional route killed with SIGKILL mid-charge (%s)', (adapter) => {
  const schema = uniqueSchema('txk');
  let app: INestApplication;
  let url: string;

  const rows = async (key: string): Promise<number> =>
    Number((await sql<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".ledger WHERE charge_id = $1`, [key]))[0].n);

  beforeAll(async () => {
    await sql(`CREATE SCHEMA "${schema}"; CREATE TABLE "${schema}".ledger (id serial PRIMARY KEY, charge_id text NOT NULL)`);
    ledgerTable = `"${schema}".ledger`;
    app = await createTestApp({ adapter, schema, controllers: [ChargeController] });
    url = await listen(app);
  });

  afterAll(async () => {
    await app?.close();
  });

  it('leaves no ledger row; the retry charges exactly once', async () => {
    ledgerTable = `"${schema}".ledger`;
    const child: ChildProcess = spawn(process.execPath, nodeEntry(join(__dirname, 'fixtures', 'tx-crash-app.ts')), {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: databaseUrl(), REDIS_URL: redisUrl(), IDEM_SCHEMA: schema, IDEM_ADAPTER: adapter, TS_NODE_PROJECT: join(ROOT, 'tsconfig.json') },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const lines: string[] = [];
    createInterface({ input: child.stdout! }).on('line', (line) => lines.push(line));
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      const listening = await waitUntil(`the child listens (output: ${lines.join(' | ')})`, () => lines.find((l) => l.startsWith('LISTENING ')), { timeoutMs: 60_000 });
      const childUrl = listening.slice('LISTENING '.length);
      void request(childUrl).post('/charges').set('Idempotency-Key', 'k-crash').send({ amount: 1 }).then(() => undefined, () => undefined);
      await waitUntil(`the child wrote (output: ${lines.join(' | ')})`, () => lines.includes('WROTE k-crash'), { timeoutMs: 30_000 });
    } finally {
      child.kill('SIGKILL');
      await exited;
    }
    // The server ends the dead app's transaction when it sees the socket close: then nothing holds the key.
    await waitUntil('Postgres ended the killed app\'s transaction', async () => Number((await sql<{ n: string }>(
      `SELECT count(*) AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace s ON s.oid = c.relnamespace
        WHERE s.nspname = $1 AND c.relname = 'ledger'`, [schema],
    ))[0].n) === 0);
    expect(await rows('k-crash')).toBe(0);
    const retried = await request(url).post('/charges').set('Idempotency-Key', 'k-crash').send({ amount: 1 });
    expect(retried.status).toBe(201);
    expect(retried.headers['idempotent-replayed']).toBeUndefined();
    const replay = await request(url).post('/charges').set('Idempotency-Key', 'k-crash').send({ amount: 1 });
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(await rows('k-crash')).toBe(1);
  });
});
