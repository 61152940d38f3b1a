import type { EntityManager } from 'typeorm';
import { NotInTransactionError } from '../errors/not-in-transaction.error';
import { activeTransaction, currentTransaction, transactionsRunning, withTransaction } from './current-transaction';

/** A stand-in manager: withTransaction only carries it (no DataSource bound, so no TransactionHost joins). */
function manager(name: string): EntityManager {
  return { name } as unknown as EntityManager;
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('withTransaction', () => {
  it('makes the manager current across awaits until the work settles, then nothing is current', async () => {
    const m = manager('a');
    const seen = await withTransaction(m, async () => {
      await tick();
      return currentTransaction();
    });
    expect(seen).toBe(m);
    expect(transactionsRunning()).toBe(0);
    expect(activeTransaction()).toBeUndefined();
    expect(() => currentTransaction()).toThrow(NotInTransactionError);
  });

  it('keeps concurrent and nested calls to their own manager, and counts each until it settles', async () => {
    for (let round = 0; round < 2; round++) {
      const [a, b, inner] = [manager('a'), manager('b'), manager('inner')];
      const first = withTransaction(a, async () => {
        await tick();
        const nested = await withTransaction(inner, async () => {
          await tick();
          return currentTransaction();
        });
        await tick();
        return [nested, currentTransaction()];
      });
      const second = withTransaction(b, async () => {
        await tick();
        return currentTransaction();
      });
      expect(transactionsRunning()).toBe(2);
      await expect(first).resolves.toEqual([inner, a]);
      await expect(second).resolves.toBe(b);
      expect(transactionsRunning()).toBe(0);
      expect(activeTransaction()).toBeUndefined();
    }
  });

  it('stops counting work that throws or rejects, and hands back the same promise', async () => {
    expect(() => withTransaction(manager('sync'), () => {
      throw new Error('sync failure');
    })).toThrow('sync failure');
    const rejected = Promise.reject(new Error('async failure'));
    expect(withTransaction(manager('async'), () => rejected)).toBe(rejected);
    await expect(rejected).rejects.toThrow('async failure');
    await tick();
    expect(transactionsRunning()).toBe(0);
    expect(withTransaction(manager('value'), () => currentTransaction())).toEqual({ name: 'value' });
    expect(transactionsRunning()).toBe(0);
  });
});
