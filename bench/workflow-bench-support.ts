// Helpers shared by the workflow benchmark and its DBOS peer process.
import { performance } from 'node:perf_hooks';

/** Steps per benchmark workflow. */
export const STEPS = 10;

/** The p-th percentile of `values` (NaN when empty). */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** Runs `total` tasks keeping `concurrency` in flight; returns elapsed ms. */
export async function keepInFlight(total: number, concurrency: number, task: (i: number) => Promise<unknown>): Promise<number> {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: Math.min(concurrency, total) }, async () => {
      while (next < total) await task(next++);
    }),
  );
  return performance.now() - t0;
}
