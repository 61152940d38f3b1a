// The fault injector: while a scenario runs, SIGKILLs a random instance every few seconds and restarts it, and at
// given points of the scenario's progress restarts Redis empty, flushes it, or restarts Postgres. One fault at a
// time, so at most one instance is down at once.
import type { Instance } from './instances';
import type { ChaosServices } from './services';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Planned faults; `kill` SIGKILLs a random instance (besides the periodic kills), so even a short scenario gets one. */
export type FaultKind = 'redis-restart' | 'redis-flush' | 'postgres-restart' | 'kill';

/** A fault to inject once the scenario's progress (0..1) reaches `at`. */
export interface PlannedFault {
  at: number;
  kind: FaultKind;
}

/** What happened, in ms since the scenario started. */
export interface FaultEvent {
  atMs: number;
  endMs: number;
  kind: FaultKind;
  detail: string;
}

export class Supervisor {
  readonly events: FaultEvent[] = [];
  private running = true;
  private loop?: Promise<void>;
  private readonly pending: PlannedFault[];
  private readonly t0 = Date.now();
  private killing = false;

  constructor(
    private readonly instances: Instance[],
    private readonly services: ChaosServices,
    private readonly killEveryMs: number,
    plan: PlannedFault[],
    private readonly progress: () => number,
  ) {
    this.pending = [...plan].sort((a, b) => a.at - b.at);
  }

  start(): void {
    this.loop = this.run();
  }

  /** Stops injecting (after the fault in progress) and restarts any instance that is down. */
  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
    for (const instance of this.instances) if (!instance.alive) await instance.restart();
  }

  /** Faults of the plan that never fired because the scenario ended first. */
  get missed(): PlannedFault[] {
    return this.pending;
  }

  /** Postgres outages as [start, end] in epoch ms, widened by `marginMs` on both sides. */
  postgresWindows(marginMs: number): [number, number][] {
    return this.events.filter((e) => e.kind === 'postgres-restart').map((e) => [this.t0 + e.atMs - marginMs, this.t0 + e.endMs + marginMs]);
  }

  get kills(): number {
    return this.events.filter((e) => e.kind === 'kill').length;
  }

  /**
   * Resolves once every fault planned at or before `progress` has started, so a load generator that awaits it
   * before each request lands every fault mid-load, however fast the scenario runs.
   */
  async reached(progress: number): Promise<void> {
    while (this.running && this.pending.length > 0 && this.pending[0].at <= progress) await sleep(50);
  }

  private run(): Promise<void> {
    return Promise.all([this.faultLoop(), this.killLoop()]).then(() => undefined);
  }

  /** Planned faults, in order, each once its point of progress is reached. */
  private async faultLoop(): Promise<void> {
    while (this.running) {
      const due = this.pending[0];
      if (due && this.progress() >= due.at) {
        const kind = due.kind;
        if (kind === 'kill') await this.killOne();
        else await this.inject(kind, () => this.fault(kind), kind);
        this.pending.shift();
      } else await sleep(50);
    }
  }

  /** A random instance SIGKILLed and restarted every few seconds; one down at a time. */
  private async killLoop(): Promise<void> {
    if (this.killEveryMs <= 0) return;
    let nextKill = Date.now() + this.jitter();
    while (this.running) {
      if (Date.now() >= nextKill) {
        await this.killOne();
        nextKill = Date.now() + this.jitter();
      }
      await sleep(100);
    }
  }

  /** SIGKILLs a random live instance and restarts it; one instance down at a time (the kill lock). */
  private async killOne(): Promise<void> {
    while (this.killing) await sleep(50);
    this.killing = true;
    try {
      const alive = this.instances.filter((i) => i.alive);
      const victim = alive[Math.floor(Math.random() * alive.length)];
      if (!victim) return;
      const pid = victim.proc?.pid ?? 0;
      await this.inject('kill', async () => {
        await victim.kill();
        await victim.restart();
      }, `${victim.name} pid ${pid}`);
    } finally {
      this.killing = false;
    }
  }

  private jitter(): number {
    return this.killEveryMs * (0.5 + Math.random());
  }

  private fault(kind: Exclude<FaultKind, 'kill'>): Promise<void> {
    switch (kind) {
      case 'redis-restart':
        return this.services.restartRedisEmpty(500);
      case 'redis-flush':
        return this.services.flushRedis();
      case 'postgres-restart':
        return this.services.restartPostgres(1_000);
    }
  }

  private async inject(kind: FaultKind, action: () => Promise<void>, detail: string): Promise<void> {
    const atMs = Date.now() - this.t0;
    await action();
    this.events.push({ atMs, endMs: Date.now() - this.t0, kind, detail });
    process.stderr.write(`[chaos] ${(atMs / 1000).toFixed(1)}s ${kind}: ${detail}\n`);
  }
}
