// Issue 14: the console's operations from a shell (`npx nestjs-idempotency workflows …|keys …`), as a real process
// against the app's database: list, show, cancel and resume executions; show and release a stuck key.
import { INestApplication } from '@nestjs/common';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { IdempotencyService, Step, Workflow, WorkflowClient } from '../../lib';
import { consoleCommand } from '../../lib/cli/console-command';
import { gate, waitUntil } from '../support/resilience';
import { createTestApp, databaseUrl, sql, uniqueSchema } from '../support/test-app';
import { FAST, uniquePrefix } from '../workflow/support';
import { nodeEntry } from '../support/node-entry';

jest.setTimeout(90_000);

const ROOT = join(__dirname, '..', '..');
const hold = gate();
let fail = true;

@Workflow({ name: 'refund' })
class RefundWorkflow {
  async run(input: { wait: boolean }): Promise<string> {
    if (input.wait) await this.approval();
    return this.pay();
  }

  @Step()
  async approval(): Promise<void> {
    await hold.promise;
  }

  @Step({ attempts: 1 })
  pay(): Promise<string> {
    return fail ? Promise.reject(new Error('bank down')) : Promise.resolve('paid');
  }
}

/** The bin as a real process (slow to start under ts-node: used once, to prove the dispatch). */
function bin(schema: string, ...args: string[]): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [...nodeEntry(join(ROOT, 'lib', 'cli', 'nestjs-idempotency.ts')), ...args],
      { cwd: ROOT, env: { ...process.env, DATABASE_URL: databaseUrl(), IDEMPOTENCY_SCHEMA: schema } },
      (error, out, err) => resolve({ code: error ? Number(error.code ?? 1) : 0, out, err }),
    );
  });
}

/** The same command in this process, on the same database (what the bin runs after parsing nothing else). */
async function cli(schema: string, ...args: string[]): Promise<{ code: number; out: string; err: string }> {
  const result = await consoleCommand(args, { ...process.env, DATABASE_URL: databaseUrl(), IDEMPOTENCY_SCHEMA: schema });
  return { code: result.code, out: result.out.join('\n'), err: result.err.join('\n') };
}

describe('CLI: nestjs-idempotency workflows … / keys …', () => {
  const schema = uniqueSchema('cli');
  let app: INestApplication;

  beforeAll(async () => {
    app = await createTestApp({ adapter: 'express', schema, controllers: [], providers: [RefundWorkflow], options: { workflows: { ...FAST, queuePrefix: uniquePrefix() } } });
  });

  afterAll(async () => {
    hold.open();
    await app?.close();
    await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });

  it('lists, shows, resumes a failed execution and cancels a running one', async () => {
    const client = app.get(WorkflowClient);
    const failed = await client.start(RefundWorkflow, { wait: false }, { workflowId: 'refund-1' });
    await expect(failed.result({ timeout: 30_000 })).rejects.toThrow();
    await client.start(RefundWorkflow, { wait: true }, { workflowId: 'refund-2' });

    const listed = await bin(schema, 'workflows', 'list', '--status', 'failed');
    expect(listed.code).toBe(0);
    expect((JSON.parse(listed.out) as { workflowId: string }[]).map((e) => e.workflowId)).toEqual(['refund-1']);

    const shown = await cli(schema, 'workflows', 'show', failed.executionId);
    const { execution, steps } = JSON.parse(shown.out) as { execution: { status: string }; steps: { name: string; status: string; error: { message: string } }[] };
    expect(execution.status).toBe('failed');
    expect(steps.map((s) => [s.name, s.status, s.error.message])).toEqual([['pay', 'failed', 'bank down']]);

    fail = false;
    expect((await cli(schema, 'workflows', 'resume', 'refund-1')).code).toBe(0);
    await expect(failed.result({ timeout: 30_000 })).resolves.toBe('paid'); // the app's reconciler picked it up

    const cancelled = await cli(schema, 'workflows', 'cancel', 'refund-2');
    expect(cancelled.code).toBe(0);
    expect((JSON.parse(cancelled.out) as { execution: { status: string } }).execution.status).toBe('cancelled');
    expect((await cli(schema, 'workflows', 'cancel', 'refund-2')).code).toBe(1);
  });

  it('shows a stuck key and releases it', async () => {
    const engine = app.get(IdempotencyService);
    const claim = { scope: 'method:billing', key: 'inv-9', fingerprint: '', leaseMs: 600_000, ttlMs: 600_000 };
    expect((await engine.begin(claim)).kind).toBe('acquired');
    const shown = await cli(schema, 'keys', 'show', 'method:billing', 'inv-9');
    expect(JSON.parse(shown.out)).toEqual([expect.objectContaining({ status: 'in_progress', leaseHeld: true })]);
    expect(JSON.parse((await cli(schema, 'keys', 'release', 'method:billing', 'inv-9', '--redis-prefix', `idem-${schema}`)).out)).toEqual({ released: true });
    await waitUntil('the key is free again', async () => ((await engine.begin({ ...claim, leaseMs: 1000 })).kind === 'acquired' ? true : undefined));
  });

  it('refuses unknown commands and wrong arguments with exit 2 and the usage', async () => {
    const bad = await cli(schema, 'workflows', 'explode');
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('workflows list');
    expect((await cli(schema, 'keys', 'show', 'only-scope')).code).toBe(2);
  });
});
