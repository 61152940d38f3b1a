// Only the task cases of the workflow benchmark (issue 12): `node scripts/run-bench.js workflows-tasks`.
// Settings (environment): BENCH_SCALE (1; multiplies the number of tasks), BENCH_BASE=<checkout> (see the cases).
import 'reflect-metadata';
import { runBench } from './bench-support';
import { taskCases } from './workflow-tasks.bench-cases';

runBench(async () => {
  const count = Math.max(1, Math.round(2000 * Number(process.env.BENCH_SCALE ?? 1)));
  const lines = await taskCases(process.env.DATABASE_URL ?? '', process.env.REDIS_URL ?? '', count);
  for (const line of lines) process.stdout.write(`${line}\n`);
});
