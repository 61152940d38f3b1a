import { TickBatch } from './tick-batch';

describe('TickBatch', () => {
  it('hands over everything added in one tick as one list, after the tick', async () => {
    const flushed: number[][] = [];
    const batch = new TickBatch<number>(100, (items) => flushed.push(items));
    batch.add(1);
    batch.add(2);
    await Promise.resolve().then(() => batch.add(3));
    expect(flushed).toEqual([]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(flushed).toEqual([[1, 2, 3]]);
  });

  it('starts a new list in the next tick', async () => {
    const flushed: number[][] = [];
    const batch = new TickBatch<number>(100, (items) => flushed.push(items));
    batch.add(1);
    await new Promise((resolve) => setImmediate(resolve));
    batch.add(2);
    await new Promise((resolve) => setImmediate(resolve));
    expect(flushed).toEqual([[1], [2]]);
  });

  it('hands over a full list at once, and the rest at the end of the tick', async () => {
    const flushed: number[][] = [];
    const batch = new TickBatch<number>(2, (items) => flushed.push(items));
    for (const n of [1, 2, 3, 4, 5]) batch.add(n);
    expect(flushed).toEqual([[1, 2], [3, 4]]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(flushed).toEqual([[1, 2], [3, 4], [5]]);
  });
});
