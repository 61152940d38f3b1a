import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { databaseUrl, redisUrl, sql, uniqueSchema } from '../support/test-app';
import { nodeEntry } from '../support/node-entry';

const ROOT = join(__dirname, '..', '..');

/** Runs fixtures/without-peers.ts in its own process with the given packages made unresolvable. */
function runWithout(blocked: string[], mode: string, schema: string): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['-r', join(__dirname, 'fixtures', 'block-peers.js'), ...nodeEntry(join(__dirname, 'fixtures', 'without-peers.ts'))],
      { cwd: ROOT, env: { ...process.env, BLOCK_PEERS: blocked.join(','), MODE: mode, TEST_SCHEMA: schema, DATABASE_URL: databaseUrl(), REDIS_URL: redisUrl() } },
      (error, stdout, stderr) => {
        const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
        if (!line) return reject(new Error(`no RESULT line (${error?.message ?? 'exit 0'}):\n${stdout}\n${stderr}`));
        resolve(JSON.parse(line.slice('RESULT '.length)) as Record<string, unknown>);
      },
    );
  });
}

describe('optional peers: ioredis and bullmq are loaded only when configured', () => {
  const schemas: string[] = [];
  const fresh = () => {
    const schema = uniqueSchema('peer');
    schemas.push(schema);
    return schema;
  };
  afterAll(async () => {
    for (const schema of schemas) await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });

  it('with redis: false and no workflows, runs without ioredis, bullmq and the nestjs-cls packages installed', async () => {
    const result = await runWithout(['ioredis', 'bullmq', 'nestjs-cls', '@nestjs-cls/transactional', '@nestjs-cls/transactional-adapter-typeorm'], 'postgres-only', fresh());
    expect(result).toEqual({ ok: true, statuses: [201, 201], replayed: 'true', charged: ['charged a', 'charged a'], runs: 2, loaded: [] });
  });

  it('with Redis and no workflows, runs without bullmq installed', async () => {
    const result = await runWithout(['bullmq'], 'redis', fresh());
    expect(result).toMatchObject({ ok: true, statuses: [201, 201], replayed: 'true', runs: 2, loaded: ['ioredis'] });
  });

  it('without @opentelemetry/api, @nestjs/swagger and @nestjs/terminus, runs with metrics, traces and docs as no-ops', async () => {
    const result = await runWithout(['@opentelemetry/api', '@nestjs/swagger', '@nestjs/terminus'], 'redis', fresh());
    expect(result).toMatchObject({ ok: true, statuses: [201, 201], replayed: 'true', runs: 2 });
  });

  it('with Redis configured but ioredis missing, fails at startup naming the package and the way out', async () => {
    const result = await runWithout(['ioredis', 'bullmq'], 'redis', fresh());
    expect(result).toMatchObject({ ok: false, name: 'IdempotencyConfigError' });
    expect(result.message).toMatch(/redis: needs the optional peer dependency "ioredis".*npm install ioredis.*redis: false/);
  });

  it('with a @Workflow() class but bullmq missing, fails at startup naming the package', async () => {
    const result = await runWithout(['bullmq'], 'workflow', fresh());
    expect(result).toMatchObject({ ok: false, name: 'IdempotencyConfigError' });
    expect(result.message).toMatch(/workflows \(@Workflow\(\) classes\): needs the optional peer dependency "bullmq".*npm install bullmq/);
  });
});
