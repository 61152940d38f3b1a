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

/** Polls `check` every 10 ms until it holds; throws after `timeoutMs`. */
export async function waitFor(what: string, check: () => Promise<boolean> | boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`bench: ${what} did not happen within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
