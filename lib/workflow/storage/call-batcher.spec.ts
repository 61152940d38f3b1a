import { CallBatcher } from './call-batcher';

describe('CallBatcher', () => {
  it('answers the calls of one turn with one batch, a lone call on its own, an unanswered one on its own', async () => {
    const batches: number[][] = [];
    const singles: number[] = [];
    const batcher = new CallBatcher<number, string>(
      (args) => {
        batches.push(args);
        return Promise.resolve(args.map((n) => (n === 3 ? undefined : `b${n}`)));
      },
      (n) => {
        singles.push(n);
        return Promise.resolve(`s${n}`);
      },
    );
    expect(await Promise.all([1, 2, 3].map((n) => batcher.call(n)))).toEqual(['b1', 'b2', 's3']);
    expect(await batcher.call(4)).toBe('s4');
    expect(batches).toEqual([[1, 2, 3]]);
    expect(singles).toEqual([3, 4]);
  });

  it('fails every call of a failed batch, and flushes at `max` calls', async () => {
    const sizes: number[] = [];
    const batcher = new CallBatcher<number, number>(
      (args) => {
        sizes.push(args.length);
        return args.includes(0) ? Promise.reject(new Error('batch failed')) : Promise.resolve(args);
      },
      (n) => Promise.resolve(n),
      2,
    );
    await expect(Promise.all([batcher.call(0), batcher.call(1)])).rejects.toThrow('batch failed');
    expect(await Promise.all([5, 6, 7].map((n) => batcher.call(n)))).toEqual([5, 6, 7]);
    expect(sizes).toEqual([2, 2]);
  });

  it('with retrySingly, answers each call of a failed batch on its own', async () => {
    const batcher = new CallBatcher<number, number>(
      () => Promise.reject(new Error('batch failed')),
      (n) => (n === 0 ? Promise.reject(new Error(`call ${n} failed`)) : Promise.resolve(n * 10)),
      100,
      true,
    );
    const answers = await Promise.allSettled([0, 1, 2].map((n) => batcher.call(n)));
    expect(answers.map((a) => (a.status === 'fulfilled' ? a.value : (a.reason as Error).message))).toEqual(['call 0 failed', 10, 20]);
  });
});
