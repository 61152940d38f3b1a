import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { nodeEntry } from '../support/node-entry';

const FIXTURE = join(__dirname, 'fixtures', 'relay-process.ts');

/** A relay process (fixtures/relay-process.ts) and its output lines. */
export interface RelayChild {
  proc: ChildProcess;
  output: string[];
  /** Resolves with the first stdout line starting with `prefix`; rejects if the process exits first. */
  line(prefix: string, timeoutMs?: number): Promise<string>;
  exited: Promise<void>;
}

/** Starts a relay process on the schema; stop it with `stop` (by its handle, never by name). */
export function spawnRelay(env: Record<string, string>): RelayChild {
  const proc = spawn(process.execPath, nodeEntry(FIXTURE), {
    cwd: join(__dirname, '..', '..'),
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  let buffer = '';
  proc.stdout.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    const lines = buffer.split('\n');
    buffer = lines.pop() ?? '';
    output.push(...lines);
  });
  proc.stderr.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const line = async (prefix: string, timeoutMs = 60_000): Promise<string> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = output.find((l) => l.startsWith(prefix));
      if (found) return found;
      if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`relay exited before "${prefix}":\n${output.join('\n')}`);
      if (Date.now() > deadline) throw new Error(`no "${prefix}" from the relay within ${timeoutMs} ms:\n${output.join('\n')}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  };
  return { proc, output, exited, line };
}

/** Stops a relay this test started; SIGKILL simulates a crash. */
export async function stop(child: RelayChild | undefined, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  if (!child || child.proc.exitCode !== null || child.proc.signalCode !== null) return;
  child.proc.kill(signal);
  await child.exited;
}
