// Child process of bench/workflows.bench.ts: the same 10-step workflows of trivial steps on DBOS Transact
// (@dbos-inc/dbos-sdk, a dev dependency), against the same Postgres server, in a process of its own (DBOS is
// a process-wide singleton). Its system database is created by DBOS and dropped by the parent afterwards.
// Input: BENCH_DBOS_CONFIG = { url, concurrencies: [[concurrency, workflows], …] }; output: one JSON line on
// stdout with steps/s and the per-step overhead per concurrency.
import { DBOS } from '@dbos-inc/dbos-sdk';
import { performance } from 'node:perf_hooks';
import { keepInFlight, percentile, STEPS } from './workflow-bench-support';

export interface DbosPeerConfig {
  /** The system database's URL (a database of its own on the benchmark's Postgres server). */
  url: string;
  concurrencies: [number, number][];
}

export interface DbosPeerRow {
  concurrency: number;
  workflows: number;
  perSec: number;
  p50: number;
  p99: number;
}

const overheads: number[] = [];

function add(total: number, i: number): Promise<number> {
  return Promise.resolve(total + i); // trivial: the measured time is the library's overhead
}

async function tenSteps(n: number): Promise<number> {
  let total = n;
  for (let i = 0; i < STEPS; i++) {
    const t0 = performance.now();
    total = await DBOS.runStep(() => add(total, i), { name: 'add' });
    overheads.push(performance.now() - t0);
  }
  return total;
}

async function main(): Promise<void> {
  const config = JSON.parse(process.env.BENCH_DBOS_CONFIG ?? 'null') as DbosPeerConfig | null;
  if (!config) throw new Error('BENCH_DBOS_CONFIG is not set: this runs as a child of bench/workflows.bench.ts');
  const workflow = DBOS.registerWorkflow(tenSteps, { name: 'bench-ten-steps' });
  DBOS.setConfig({ name: 'nestjs-idempotency-bench', systemDatabaseUrl: config.url, applicationVersion: '0.1.0' });
  await DBOS.launch();
  const rows: DbosPeerRow[] = [];
  try {
    for (const [concurrency, workflows] of config.concurrencies) {
      await keepInFlight(Math.max(concurrency * 2, 20), concurrency, (i) => workflow(i)); // warm-up, not measured
      overheads.length = 0;
      const ms = await keepInFlight(workflows, concurrency, (i) => workflow(i));
      rows.push({ concurrency, workflows, perSec: (workflows * STEPS) / (ms / 1000), p50: percentile(overheads, 50), p99: percentile(overheads, 99) });
    }
  } finally {
    await DBOS.shutdown();
  }
  process.stdout.write(`${JSON.stringify(rows)}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
