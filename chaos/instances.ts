// App instances of the chaos run: real processes of chaos/app.ts, each on a fixed loopback port so a restarted
// instance keeps its address. Only the PIDs started here are ever signalled.
import { ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, WriteStream } from 'node:fs';
import { join } from 'node:path';
import { services } from './services';

/** One instance slot: its port stays, its process changes at every restart. */
export class Instance {
  proc?: ChildProcess;
  /** PIDs this slot's processes had when they were SIGKILLed. */
  readonly killed: number[] = [];
  private log?: WriteStream;

  constructor(
    readonly name: string,
    readonly port: number,
    /** The app's compiled entry file (see build.ts). */
    private readonly entry: string,
    private readonly env: Record<string, string>,
    private readonly logFile: string,
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get alive(): boolean {
    return !!this.proc && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** Starts the process and waits for its "LISTENING" line. */
  async start(timeoutMs = 120_000): Promise<void> {
    this.log ??= createWriteStream(this.logFile, { flags: 'a' });
    const proc = spawn(process.execPath, [this.entry], {
      cwd: services.ROOT,
      env: { ...process.env, ...this.env, CHAOS_PORT: String(this.port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.proc = proc;
    // Nest's logger writes warnings to stdout and errors to stderr: both go to the log
    proc.stdout.pipe(this.log, { end: false });
    proc.stderr.pipe(this.log, { end: false });
    await new Promise<void>((resolve, reject) => {
      let buffer = '';
      const timer = setTimeout(() => reject(new Error(`${this.name} did not start within ${timeoutMs} ms (log: ${this.logFile})`)), timeoutMs);
      proc.stdout.on('data', (chunk: Buffer) => {
        buffer += chunk.toString();
        if (buffer.includes('LISTENING')) {
          clearTimeout(timer);
          resolve();
        }
      });
      proc.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`${this.name} exited (${code ?? signal}) before listening (log: ${this.logFile})`));
      });
    });
  }

  /** Starts again after a crash; retried, as a boot can fail while Postgres is being restarted. */
  async restart(tries = 5): Promise<void> {
    for (let i = 1; ; i++) {
      try {
        return await this.start();
      } catch (err) {
        if (i >= tries) throw err;
        await new Promise((resolve) => setTimeout(resolve, 1_000));
      }
    }
  }

  /** SIGKILL: a crash, nothing runs after it. */
  async kill(): Promise<void> {
    const proc = this.proc;
    if (!proc || !this.alive) return;
    if (proc.pid) this.killed.push(proc.pid);
    const exited = new Promise((resolve) => proc.once('exit', resolve));
    proc.kill('SIGKILL');
    await exited;
  }

  /** Graceful stop (SIGTERM runs Nest's shutdown hooks), SIGKILL after 10 s. */
  async stop(): Promise<void> {
    await services.stop(this.proc, 'SIGTERM');
  }

  close(): void {
    this.log?.end();
  }
}

/** Creates `count` instance slots on free ports. */
export async function instanceSlots(prefix: string, count: number, entry: string, env: Record<string, string>, logDir: string): Promise<Instance[]> {
  const slots: Instance[] = [];
  for (let i = 0; i < count; i++) {
    const name = `${prefix}-${i + 1}`;
    slots.push(new Instance(name, await services.freePort(), entry, env, join(logDir, `${name}.log`)));
  }
  return slots;
}
