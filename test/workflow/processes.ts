import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import type { Scenario } from './support';
import { nodeEntry } from '../support/node-entry';

const FIXTURE = join(__dirname, 'fixtures', 'worker-process.ts');

/** A child process running fixtures/worker-process.ts. */
export interface Child {
  proc: ChildProcess;
  output: string[];
  /** Resolves with the first stdout line starting with `prefix`. */
  line(prefix: string, timeoutMs?: number): Promise<string>;
  exited: Promise<number | null>;
}

/** Spawns the fixture (worker-process.ts unless another is named) with the scenario's settings; stop it with `kill` (by its handle, never by name). */
export function spawnWorker(s: Scenario, env: Record<string, string> = {}, fixture = FIXTURE): Child {
  const proc = spawn(process.execPath, nodeEntry(fixture), {
    cwd: join(__dirname, '..', '..'),
    env: { ...process.env, DATABASE_URL: s.databaseUrl, REDIS_URL: s.redisUrl, WF_SCHEMA: s.schema, WF_PREFIX: s.prefix, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  const listeners = new Set<(line: string) => void>();
  let buffer = '';
  proc.stdout.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    let i: number;
    while ((i = buffer.indexOf('\n')) >= 0) {
      const text = buffer.slice(0, i);
      buffer = buffer.slice(i + 1);
      output.push(text);
      for (const l of listeners) l(text);
    }
  });
  proc.stderr.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  return {
    proc,
    output,
    exited,
    line: (prefix, timeoutMs = 60_000) =>
      new Promise<string>((resolve, reject) => {
        const found = output.find((l) => l.startsWith(prefix));
        if (found) return resolve(found);
        const timer = setTimeout(() => {
          listeners.delete(listener);
          reject(new Error(`no "${prefix}" line from the worker within ${timeoutMs} ms; output:\n${output.join('\n')}`));
        }, timeoutMs);
        const listener = (text: string) => {
          if (!text.startsWith(prefix)) return;
          clearTimeout(timer);
          listeners.delete(listener);
          resolve(text);
        };
        listeners.add(listener);
        void exited.then((code) => {
          if (!listeners.has(listener)) return;
          clearTimeout(timer);
          listeners.delete(listener);
          reject(new Error(`worker exited (${code}) before printing "${prefix}"; output:\n${output.join('\n')}`));
        });
      }),
  };
}

/** Kills a child this test started (SIGKILL simulates a crash) and waits for it to exit. */
export async function kill(child: Child | undefined, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  if (!child || child.proc.exitCode !== null || child.proc.signalCode !== null) return;
  child.proc.kill(signal);
  await child.exited;
}
