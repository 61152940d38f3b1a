import type { INestApplicationContext } from '@nestjs/common';
import { IdempotencyService } from '../../lib';
import { gate, waitUntil } from '../support/resilience';
import { createEngineContext, uniqueSchema } from '../support/test-app';

describe('transactional claims of apps with their own schemas in one database', () => {
  let a: INestApplicationContext;
  let b: INestApplicationContext;

  beforeAll(async () => {
    // Postgres-only, so that nothing but Postgres could make the two meet.
    [a, b] = await Promise.all([uniqueSchema('apart'), uniqueSchema('apart')].map((schema) => createEngineContext(schema, { redis: false })));
  });

  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
  });

  it('never wait for each other on the same scope and key: each app runs its own call at once', async () => {
    const held = gate();
    let entered = false;
    const first = a.get(IdempotencyService).run('order-42', async () => {
      entered = true;
      await held.promise;
      return 'a';
    }, { transaction: true });
    try {
      await waitUntil('the first app runs its call', () => entered);
      // Before, the key's advisory lock was the same in every schema of the database: the other app's claim found
      // it held and answered in progress (DuplicateExecutionError) until the first one committed.
      await expect(b.get(IdempotencyService).run('order-42', () => 'b', { transaction: true })).resolves.toBe('b');
    } finally {
      held.open();
    }
    await expect(first).resolves.toBe('a');
  });
});
