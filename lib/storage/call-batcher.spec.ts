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
      { max: 2 },
    );
    await expect(Promise.all([batcher.call(0), batcher.call(1)])).rejects.toThrow('batch failed');
    expect(await Promise.all([5, 6, 7].map((n) => batcher.call(n)))).toEqual([5, 6, 7]);
    expect(sizes).toEqual([2, 2]);
  });

  it('with retrySingly, answers each call of a failed batch on its own', async () => {
    const batcher = new CallBatcher<number, number>(
      () => Promise.reject(new Error('batch failed')),
      (n) => (n === 0 ? Promise.reject(new Error(`call ${n} failed`)) : Promise.resolve(n * 10)),
      { retrySingly: true },
    );
    const answers = await Promise.allSettled([0, 1, 2].map((n) => batcher.call(n)));
    expect(answers.map((a) => (a.status === 'fulfilled' ? a.value : (a.reason as Error).message))).toEqual(['call 0 failed', 10, 20]);
  });

  it('with a retrySingly predicate, answers each call on its own only after the errors it accepts', async () => {
    const rowLevel = Object.assign(new Error('bad row'), { code: '22021' });
    const down = new Error('Connection terminated unexpectedly');
    let failWith: Error = rowLevel;
    const singles: number[] = [];
    const batcher = new CallBatcher<number, number>(
      () => Promise.reject(failWith),
      (n) => {
        singles.push(n);
        return n === 0 ? Promise.reject(rowLevel) : Promise.resolve(n);
      },
      { retrySingly: (err) => (err as { code?: string }).code === '22021' },
    );
    const afterRowLevel = await Promise.allSettled([0, 1].map((n) => batcher.call(n)));
    expect(afterRowLevel.map((a) => a.status)).toEqual(['rejected', 'fulfilled']);
    expect(singles).toEqual([0, 1]);

    failWith = down;
    const afterDown = await Promise.allSettled([2, 3].map((n) => batcher.call(n)));
    expect(afterDown).toEqual([{ status: 'rejected', reason: down }, { status: 'rejected', reason: down }]);
    expect(singles).toEqual([0, 1]);
  });

  it('never puts two calls with one identity in a batch: the later one is answered on its own', async () => {
    const batches: string[][] = [];
    const batcher = new CallBatcher<string, string>(
      (args) => {
        batches.push(args);
        return Promise.resolve(args.map((a) => `batch:${a}`));
      },
      (a) => Promise.resolve(`single:${a}`),
      { identity: (a) => a.split('#')[0] },
    );
    expect(await Promise.all(['k#1', 'x', 'k#2'].map((a) => batcher.call(a)))).toEqual(['batch:k#1', 'batch:x', 'single:k#2']);
    expect(batches).toEqual([['k#1', 'x']]);
  });
});
