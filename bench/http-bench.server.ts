// Child process of bench/http.bench.ts: serves bench apps of one adapter so that the load generator
// (autocannon, in the parent) and the server under test each have their own event loop; the parent starts
// one such process per library, so that no two libraries share a process.
// Protocol over IPC: parent -> { apps, adapter } in BENCH_SERVER_CONFIG; child -> { type: 'ready', ports }
// or { type: 'failed', error }; parent -> 'close'; the child closes its apps and exits. With BENCH_CPU_PROF the
// parent brackets each measured run with { type: 'profile', file } and { type: 'profiled' }: the child profiles
// exactly that run (no start-up, no warm-up), answering { type: 'profiling' } once started and
// { type: 'profile-written' } once the file is on disk.
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { startBenchApp, AdapterName, BenchApp, BenchAppSpec } from './http-bench.app';

export interface BenchServerConfig {
  adapter: AdapterName;
  apps: Record<string, BenchAppSpec>;
}

export type BenchServerMessage =
  | { type: 'ready'; ports: Record<string, number> }
  | { type: 'failed'; error: string }
  | { type: 'profiling' }
  | { type: 'profile-written' };

/** Parent -> child, besides 'close': start a CPU profile to be written to `file`, or stop and write it. */
export type BenchServerCommand = { type: 'profile'; file: string } | { type: 'profiled' };

function post(session: Session, method: string): Promise<unknown> {
  return new Promise((resolve, reject) => session.post(method, (err, result) => (err ? reject(err) : resolve(result))));
}

function postWith(session: Session, method: string, params: object): Promise<unknown> {
  return new Promise((resolve, reject) => session.post(method, params, (err, result) => (err ? reject(err) : resolve(result))));
}

/** BENCH_HEAP_PROF=1 (with BENCH_CPU_PROF): also a sampling heap profile of the run, beside the CPU profile. */
const HEAP_PROF = process.env.BENCH_HEAP_PROF === '1';

/** The V8 profiler of this process, started and stopped around one measured run. */
class RunProfiler {
  private session?: Session;
  private file = '';

  async start(file: string): Promise<void> {
    this.session = new Session();
    this.session.connect();
    this.file = file;
    await post(this.session, 'Profiler.enable');
    // 200 µs rather than V8's 1 ms: a request's own work is a few tens of µs, and a run of a few seconds then
    // gives enough samples to tell its parts apart (BENCH_CPU_PROF_INTERVAL_US overrides it).
    await postWith(this.session, 'Profiler.setSamplingInterval', { interval: Number(process.env.BENCH_CPU_PROF_INTERVAL_US ?? 200) });
    await post(this.session, 'Profiler.start');
    if (HEAP_PROF) {
      // Short-lived objects too: they are what the garbage collector spends its time on.
      await postWith(this.session, 'HeapProfiler.startSampling', {
        samplingInterval: 4096,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      });
    }
  }

  async stop(): Promise<void> {
    const session = this.session;
    if (!session) return;
    this.session = undefined;
    const { profile } = (await post(session, 'Profiler.stop')) as { profile: unknown };
    writeFileSync(this.file, JSON.stringify(profile));
    if (HEAP_PROF) {
      const heap = (await post(session, 'HeapProfiler.stopSampling')) as { profile: unknown };
      writeFileSync(this.file.replace(/\.cpuprofile$/, '.heapprofile'), JSON.stringify(heap.profile));
    }
    session.disconnect();
  }
}

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
  const profiler = new RunProfiler();
  process.on('message', (msg: 'close' | BenchServerCommand) => {
    if (msg === 'close') void close();
    else if (msg.type === 'profile') void profiler.start(msg.file).then(() => send({ type: 'profiling' }));
    else if (msg.type === 'profiled') void profiler.stop().then(() => send({ type: 'profile-written' }));
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
