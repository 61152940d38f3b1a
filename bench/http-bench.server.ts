// Child process of bench/http.bench.ts: serves bench apps of one adapter so that the load generator
// (autocannon, in the parent) and the server under test each have their own event loop; the parent starts
// one such process per library, so that no two libraries share a process.
// Protocol over IPC: parent -> { apps, adapter } in BENCH_SERVER_CONFIG; child -> { type: 'ready', ports }
// or { type: 'failed', error }; parent -> 'close'; the child closes its apps and exits.
import { startBenchApp, AdapterName, BenchApp, BenchAppSpec } from './http-bench.app';

export interface BenchServerConfig {
  adapter: AdapterName;
  apps: Record<string, BenchAppSpec>;
}

export type BenchServerMessage =
  | { type: 'ready'; ports: Record<string, number> }
  | { type: 'failed'; error: string };

function send(message: BenchServerMessage): void {
  process.send?.(message);
}

async function main(): Promise<void> {
  if (!process.send) throw new Error('http-bench.server.ts runs as a child of bench/http.bench.ts (it needs an IPC channel)');
  const config = JSON.parse(process.env.BENCH_SERVER_CONFIG ?? 'null') as BenchServerConfig | null;
  if (!config) throw new Error('BENCH_SERVER_CONFIG is not set');

  const started: BenchApp[] = [];
  let closing = false;
  const close = async () => {
    if (closing) return;
    closing = true;
    await Promise.allSettled(started.map((s) => s.app.close()));
    process.exit(0);
  };
  process.on('message', (msg) => {
    if (msg === 'close') void close();
  });
  process.on('disconnect', () => void close());

  try {
    const ports: Record<string, number> = {};
    for (const [name, spec] of Object.entries(config.apps)) {
      const app = await startBenchApp(config.adapter, spec);
      started.push(app);
      ports[name] = app.port;
    }
    send({ type: 'ready', ports });
  } catch (err) {
    send({ type: 'failed', error: err instanceof Error ? err.stack ?? err.message : String(err) });
    await close();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
