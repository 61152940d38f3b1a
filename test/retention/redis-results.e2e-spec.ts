import { INestApplication } from '@nestjs/common';
import Redis from 'ioredis';
import { randomUUID } from 'node:crypto';
import { RetentionService, Step, Workflow, WorkflowClient } from '../../lib';
import { redisUrl, sql } from '../support/test-app';
import { bootWorkflowApp, scenario } from '../workflow/support';

const SECRET = `secret-${randomUUID()}`;
const failedOnce = new Set<string>();

/** Its step results, a step argument and a retried attempt's error all carry SECRET. */
@Workflow({ name: 'secretive', retention: '1h' })
class SecretiveWorkflow {
  async run(input: { id: string }): Promise<string> {
    const prepared = await this.prepare(input.id);
    return this.finish(prepared);
  }

  @Step()
  prepare(id: string): Promise<string> {
    return Promise.resolve(`${SECRET}:${id}`);
  }

  @Step({ attempts: 2 })
  finish(prepared: string): Promise<string> {
    if (!failedOnce.has(prepared)) {
      failedOnce.add(prepared);
      return Promise.reject(new Error(`declined ${prepared}`));
    }
    return Promise.resolve(`${prepared}:done`);
  }
}

/** Everything Redis holds, as text: every key (SCAN) with its value, whatever its type. */
async function dumpRedis(redis: Redis): Promise<string> {
  const parts: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      const type = await redis.type(key);
      let value: unknown;
      if (type === 'string') value = await redis.get(key);
      else if (type === 'hash') value = await redis.hgetall(key);
      else if (type === 'list') value = await redis.lrange(key, 0, -1);
      else if (type === 'set') value = await redis.smembers(key);
      else if (type === 'zset') value = await redis.zrange(key, 0, -1, 'WITHSCORES');
      else if (type === 'stream') value = await redis.xrange(key, '-', '+');
      parts.push(`${key} ${JSON.stringify(value)}`);
    }
  } while (cursor !== '0');
  return parts.join('\n');
}

// Issue 16 item 4: what retention removes from Postgres leaves no copy in Redis (events stream, job hashes, caches).
describe('retention leaves no step result in Redis', () => {
  const s = scenario();
  let app: INestApplication;
  let client: WorkflowClient;
  let redis: Redis;

  beforeAll(async () => {
    ({ app, client } = await bootWorkflowApp(s, [SecretiveWorkflow], {}, { retention: { cleanupInterval: false } }));
    redis = new Redis(redisUrl());
  });
  afterAll(async () => {
    redis?.disconnect();
    await app?.close();
  });

  it('a distinctive result string is nowhere in Redis once cleanup removed its execution', async () => {
    const handle = await client.start(SecretiveWorkflow, { id: 'a' }, { workflowId: 'secret-1' });
    expect(await handle.result({ timeout: '30s' })).toBe(`${SECRET}:a:done`);
    // A repeated start of the completed execution is answered from (and cached in) Redis.
    expect((await client.start(SecretiveWorkflow, { id: 'a' }, { workflowId: 'secret-1' })).executionId).toBe(handle.executionId);
    await sql(`UPDATE "${s.schema}".workflow_executions SET completed_at = now() - interval '2 hours' WHERE workflow_id = 'secret-1'`);
    expect((await app.get(RetentionService).cleanup())?.workflows).toBe(1);
    expect(await sql(`SELECT 1 FROM "${s.schema}".workflow_steps WHERE execution_id = $1`, [handle.executionId])).toEqual([]);

    const dump = await dumpRedis(redis);
    expect(dump).toContain(s.prefix); // the queues' keys were read
    expect(dump).not.toContain(SECRET);
  });
});
