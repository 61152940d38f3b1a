// Observer cost: CPU the observer adds to each store call and each claim decision, in one process, with
// @opentelemetry/api installed and NO MeterProvider or TracerProvider registered (the common case of an app that
// has the package through another dependency). `node scripts/run-bench.js observer` (or
// `node -r ts-node/register/transpile-only bench/observer.bench.ts`); no Postgres or Redis needed.
//
//   raw       the store's own method
//   eager     what the module bound before: OpenTelemetryObserver over the API's no-ops (every call wrapped)
//   lazy      what it binds now: ActivatingObserver, idle until a provider is registered (stores unwrapped)
//   recording ActivatingObserver once a MeterProvider is registered (metrics only, for scale)
//
// Rounds are interleaved and the median of each is reported, so a machine loaded by other work skews all alike.
import * as api from '@opentelemetry/api';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import type { Logger } from '@nestjs/common';
import { ActivatingObserver } from '../lib/observability/activating-observer';
import type { IdempotencyObserver } from '../lib/observability/idempotency-observer';
import { OpenTelemetryObserver } from '../lib/observability/opentelemetry-observer';
import { observeIdempotencyStore } from '../lib/observability/observed-stores';
import type { IdempotencyStore } from '../lib/storage/idempotency.store';

const CALLS = 200_000;
const ROUNDS = 7;
const OPTIONS = { traces: true, recordKeys: false };
const silent = { debug() {}, log() {} } as unknown as Logger;

/** A store whose calls cost nothing but a resolved promise: what remains is the observer's own cost. */
class FreeStore {
  claim(request: { scope: string }): Promise<{ kind: string }> {
    return Promise.resolve({ kind: request.scope ? 'acquired' : 'replay' });
  }
}

type Case = { name: string; call: () => Promise<unknown> };

function storeCase(name: string, observer: IdempotencyObserver | undefined): Case {
  const raw = new FreeStore();
  const store = observer ? (observeIdempotencyStore(raw as unknown as IdempotencyStore, observer) as unknown as FreeStore) : raw;
  const request = { scope: 'http:tenant', key: 'k' };
  // One claim decision (the engine's `decide`) around one store call, as a replay or a first-time claim makes them.
  const decide = observer ? (work: () => Promise<{ kind: string }>) => observer.decide('http:tenant', 'k', work) : (work: () => Promise<{ kind: string }>) => work();
  return { name, call: () => decide(() => store.claim(request)) };
}

async function measure(c: Case): Promise<number> {
  const started = process.cpuUsage();
  for (let i = 0; i < CALLS; i++) await c.call();
  const used = process.cpuUsage(started);
  return ((used.user + used.system) * 1000) / CALLS; // ns per call
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main(): Promise<void> {
  const idle = new ActivatingObserver(api, OPTIONS, silent);
  if (idle.isRecording()) throw new Error('a provider is registered in this process: the idle case would not be idle');
  const cases = [storeCase('raw', undefined), storeCase('eager', new OpenTelemetryObserver(api, OPTIONS)), storeCase('lazy', idle)];
  const results = new Map<string, number[]>(cases.map((c) => [c.name, []]));
  for (const c of cases) await measure(c); // warm-up
  for (let round = 0; round < ROUNDS; round++) for (const c of cases) results.get(c.name)!.push(await measure(c));

  const provider = new MeterProvider();
  api.metrics.setGlobalMeterProvider(provider);
  const recording = storeCase('recording', new ActivatingObserver(api, { ...OPTIONS, traces: false }, silent));
  await measure(recording);
  results.set('recording', []);
  for (let round = 0; round < ROUNDS; round++) results.get('recording')!.push(await measure(recording));
  await provider.shutdown();

  const raw = median(results.get('raw')!);
  const load = (await import('node:os')).loadavg().map((l) => l.toFixed(2)).join(' ');
  process.stdout.write(`observer cost: ${CALLS.toLocaleString('en')} claim decisions × ${ROUNDS} rounds, median CPU per decision (one decide + one store call); load average ${load}\n`);
  for (const [name, xs] of results) {
    const m = median(xs);
    process.stdout.write(`  ${name.padEnd(10)} ${m.toFixed(0).padStart(6)} ns   +${(m - raw).toFixed(0)} ns over raw\n`);
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
