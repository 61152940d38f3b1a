// `npm run chaos [-- --profile ci|smoke|full]`: the library under process kills, Redis loss and a Postgres restart,
// counted from ledgers the way Jepsen counts. Starts its own Postgres and Redis (under .data/chaos-<pid>/), its app
// instances as real processes, drives the HTTP, method-guard, inbox and workflow scenarios, prints one table, writes
// it as JSON under .data/chaos/ and exits 1 when an invariant broke. Loopback only; stops everything it started.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { byKey, countEffects, Effect } from './analysis';
import { buildChaosApp } from './build';
import { ChaosClient, pool, RetryPolicy } from './client';
import { ChaosConfig, chaosConfig } from './config';
import { Instance, instanceSlots } from './instances';
import { allSeen, KeyedRequest, KeyedRun, runKeyed } from './keyed-scenario';
import { Report } from './report';
import { ChaosServices, services, sql } from './services';
import { PlannedFault, Supervisor } from './supervisor';

const LIBRARY_SCHEMA = 'chaos_idem';
const LEDGER = 'chaos_ledger';
const OUT = join(services.ROOT, '.data', 'chaos');
/** The instances' logs (warnings and errors) of this run. */
const LOGS = join(OUT, `logs-${new Date().toISOString().replace(/[:.]/g, '-')}`);

const log = (msg: string) => process.stderr.write(`[chaos] ${msg}\n`);

function durationMs(value: string): number {
  const m = /^(\d+)(ms|s)?$/.exec(value);
  if (!m) throw new Error(`CHAOS_LEASE must look like "2s" or "1500ms", got "${value}"`);
  return Number(m[1]) * (m[2] === 's' ? 1000 : 1);
}

async function createLedger(url: string): Promise<void> {
  // No unique constraint anywhere: a second run of a key is a second row, counted, not prevented.
  await sql(url, `CREATE SCHEMA IF NOT EXISTS ${LEDGER}`);
  await sql(url, `CREATE TABLE ${LEDGER}.effects (kind text NOT NULL, key text NOT NULL, run_id text NOT NULL, pid int NOT NULL,
                  at timestamptz NOT NULL DEFAULT clock_timestamp())`);
  await sql(url, `CREATE TABLE ${LEDGER}.step_effects (execution_id uuid NOT NULL, position int NOT NULL, step_name text NOT NULL,
                  step_key text NOT NULL, tx boolean NOT NULL, started_at timestamptz NOT NULL, pid int NOT NULL,
                  at timestamptz NOT NULL DEFAULT clock_timestamp())`);
}

async function effectsOf(url: string, kinds: string[]): Promise<Effect[]> {
  const rows = await sql<{ key: string; run_id: string; pid: number; at: Date }>(
    url,
    `SELECT key, run_id, pid, at FROM ${LEDGER}.effects WHERE kind = ANY($1)`,
    [kinds],
  );
  return rows.map((r) => ({ key: r.key, runId: r.run_id, pid: r.pid, at: r.at.getTime() }));
}

class ChaosRun {
  readonly report = new Report();
  readonly services: ChaosServices;
  private readonly all: Instance[] = [];
  private readonly retry: RetryPolicy;
  private readonly leaseMs: number;
  private readonly faults: Record<string, unknown[]> = {};
  private appEnv: Record<string, string> = {};
  private entry = '';
  /** Bodies of unexpected answers (other 5xx / 4xx), written to the JSON report. */
  readonly unexpected: string[] = [];
  /** The errors of failed step checkpoints, written to the JSON report. */
  failedSteps: unknown[] = [];

  constructor(private readonly config: ChaosConfig) {
    this.services = new ChaosServices(`chaos-${process.pid}`);
    this.leaseMs = durationMs(config.lease);
    this.retry = { attempts: config.retryAttempts, baseMs: 100, maxMs: 2_000, timeoutMs: 15_000 };
  }

  async run(): Promise<void> {
    mkdirSync(LOGS, { recursive: true });
    this.entry = buildChaosApp(services.ROOT, join(OUT, 'build'));
    await this.services.start();
    const url = this.services.databaseUrl;
    log(`postgres ${url}, redis ${this.services.redisUrl}`);
    await createLedger(url);
    this.appEnv = {
      DATABASE_URL: url,
      REDIS_URL: this.services.redisUrl,
      CHAOS_SCHEMA: LIBRARY_SCHEMA,
      CHAOS_LEDGER: LEDGER,
      CHAOS_LEASE: this.config.lease,
      CHAOS_HANDLER_MS: String(this.config.handlerMs),
      CHAOS_STEP_MS: String(this.config.stepMs),
      ...(this.config.breakInvariant ? { CHAOS_BREAK: this.config.breakInvariant } : {}),
    };
    const apps = await this.startInstances('app', this.config.instances, false);
    await this.httpScenario(apps);
    await this.guardScenario(apps);
    await this.inboxScenario(apps);
    for (const app of apps) await app.stop();
    const stuck = await sql<{ key: string }>(url, `SELECT key FROM ${LIBRARY_SCHEMA}.idempotency_records WHERE status = 'in_progress'`);
    this.report.mustBeZero('http + guard', 'keys still in progress after everything stopped and leases passed', stuck.map((r) => r.key));
    const workers = await this.startInstances('worker', 2, true);
    await this.workflowScenario(workers);
    for (const worker of workers) await worker.stop();
  }

  /** Ends every process this run started (SIGKILL for instances) and the services. */
  async cleanup(removeData: boolean): Promise<void> {
    for (const instance of this.all) {
      await instance.kill().catch(() => undefined);
      instance.close();
    }
    await this.services.stop({ removeData });
  }

  get faultLog(): Record<string, unknown[]> {
    return this.faults;
  }

  private async startInstances(prefix: string, count: number, workers: boolean): Promise<Instance[]> {
    const slots = await instanceSlots(prefix, count, this.entry, { ...this.appEnv, CHAOS_WORKERS: workers ? '1' : '0' }, LOGS);
    this.all.push(...slots);
    // the first one runs the migrations alone; the others find them done
    for (const slot of slots) await slot.start();
    return slots;
  }

  private supervisor(instances: Instance[], plan: PlannedFault[]) {
    return (progress: () => number) => new Supervisor(instances, this.services, this.config.killEveryMs, plan, progress);
  }

  private async keyed(
    scenario: string,
    instances: Instance[],
    requests: KeyedRequest[],
    plan: PlannedFault[],
  ): Promise<{ run: KeyedRun; supervisor: Supervisor }> {
    let supervisor: Supervisor | undefined;
    const make = this.supervisor(instances, plan);
    log(`${scenario}: ${requests.length} keys`);
    const run = await runKeyed(
      instances,
      requests,
      { duplicateRate: this.config.duplicateRate, concurrency: this.config.concurrency, retry: this.retry, leaseMs: this.leaseMs },
      (progress) => (supervisor = make(progress)),
    );
    const s = supervisor as unknown as Supervisor;
    this.faults[scenario] = s.events;
    const r = this.report;
    r.count(scenario, 'keys', requests.length);
    r.count(scenario, 'duplicates sent', run.duplicatesSent);
    r.count(scenario, 'requests sent (with retries)', run.client.counts.sent);
    const c = run.client.counts;
    r.count(scenario, 'outcomes: 2xx / replayed / 409 / 422 / 503 / other 5xx / connection errors / gave up',
      [c.ok, c.replayed, c['409'], c['422'], c['503'], c.other5xx, c.connection, c.gaveUp].join(' / '));
    r.count(scenario, 'faults: kills / Redis restarts empty / Redis flushes / Postgres restarts', faultSummary(s));
    this.unexpected.push(...run.client.unexpected, ...run.verify.unexpected);
    r.count(scenario, 'duration of the faulty phase (s)', (run.durationMs / 1000).toFixed(1));
    r.mustBeZero(scenario, 'planned faults not injected', s.missed.map((f) => f.kind));
    r.mustBeZero(scenario, 'keys not answered 2xx by the final pass (after the leases)', run.unanswered);
    return { run, supervisor: s };
  }

  private async httpScenario(apps: Instance[]): Promise<void> {
    const requests: KeyedRequest[] = [];
    for (let i = 0; i < this.config.httpKeys; i++) {
      const key = `h-${i}`;
      requests.push({ key, path: i % 2 === 0 ? '/http/tx' : '/http/plain', headers: { 'idempotency-key': key } });
    }
    const plan: PlannedFault[] = [
      { at: 0.2, kind: 'redis-restart' },
      { at: 0.45, kind: 'postgres-restart' },
      { at: 0.7, kind: 'redis-restart' },
    ];
    const { run, supervisor } = await this.keyed('http', apps, requests, plan);
    await this.countHandlers('http', run, supervisor, requests, { tx: 'http-tx', plain: 'http-plain', sameBytes: true });
  }

  private async guardScenario(apps: Instance[]): Promise<void> {
    const requests: KeyedRequest[] = [];
    for (let i = 0; i < this.config.guardKeys; i++) requests.push({ key: `g-${i}`, path: `/guard/${i % 2 === 0 ? 'tx' : 'plain'}/g-${i}` });
    const plan: PlannedFault[] = [
      { at: 0.25, kind: 'kill' },
      { at: 0.5, kind: 'redis-restart' },
      { at: 0.75, kind: 'kill' },
    ];
    const { run, supervisor } = await this.keyed('method guard', apps, requests, plan);
    await this.countHandlers('method guard', run, supervisor, requests, { tx: 'guard-tx', plain: 'guard-plain', sameBytes: false });
  }

  private async inboxScenario(apps: Instance[]): Promise<void> {
    const requests: KeyedRequest[] = [];
    for (let i = 0; i < this.config.inboxMessages; i++) requests.push({ key: `m-${i}`, path: `/inbox/m-${i}` });
    const { run } = await this.keyed('inbox', apps, requests, [
      { at: 0.3, kind: 'kill' },
      { at: 0.7, kind: 'kill' },
    ]);
    const effects = byKey(await effectsOf(this.services.databaseUrl, ['inbox']));
    const counts = countEffects(requests.map((q) => q.key), effects, (k) => allSeen(run, k), {
      sameBytes: false,
      killedPids: new Set(),
      postgresWindows: [],
    });
    this.report.mustBeZero('inbox', 'messages processed more than once', counts.multiEffect);
    this.report.mustBeZero('inbox', 'deliveries answered 2xx with no effect recorded (lost work)', counts.lostWork);
  }

  private async countHandlers(
    scenario: string,
    run: KeyedRun,
    supervisor: Supervisor,
    requests: KeyedRequest[],
    kinds: { tx: string; plain: string; sameBytes: boolean },
  ): Promise<void> {
    const txKeys = requests.filter((_, i) => i % 2 === 0).map((q) => q.key);
    const plainKeys = requests.filter((_, i) => i % 2 === 1).map((q) => q.key);
    const killedPids = new Set(this.all.flatMap((i) => i.killed));
    const options = { sameBytes: kinds.sameBytes, killedPids, postgresWindows: supervisor.postgresWindows(this.leaseMs + 2_000) };
    const effects = byKey(await effectsOf(this.services.databaseUrl, [kinds.tx, kinds.plain]));
        const tx = countEffects(txKeys, effects, (k) => allSeen(run, k), options);
        const plain = countEffects(plainKeys, effects, (k) => allSeen(run, k), options);
        const r = this.report;
        r.mustBeZero(scenario, 'lost work: keys answered 2xx with no effect (both handlers)', [...tx.lostWork, ...plain.lostWork]);
        r.mustBeZero(scenario, '2xx answers naming a run whose effect is missing (both handlers)', [...tx.answersWithoutEffect, ...plain.answersWithoutEffect]);
        r.mustBeZero(scenario, 'transactional handler: keys with more than one effect', tx.multiEffect);
        r.count(scenario, 'plain handler: keys with more than one effect, after a kill of their process', plain.causes.byKill);
        r.count(scenario, 'plain handler: keys with more than one effect, across the Postgres restart', plain.causes.byPostgresRestart);
        r.mustBeZero(scenario, 'plain handler: keys with more than one effect, any other cause', plain.causes.unexplained);
        r.mustBeZero(scenario, 'transactional handler: replays that differ from the first answer', tx.replayMismatch);
        r.count(scenario, 'plain handler: replays that differ from the first answer (a re-run after a lost outcome)', plain.replayMismatch.length);
  }

  private async workflowScenario(workers: Instance[]): Promise<void> {
    const url = this.services.databaseUrl;
    const n = this.config.workflows;
    const ids = Array.from({ length: n }, (_, i) => `wf-${i}`);
    let finished = 0;
    const latest = `SELECT DISTINCT ON (workflow_id) id, workflow_id, status, error, recovery_attempts
                    FROM ${LIBRARY_SCHEMA}.workflow_executions ORDER BY workflow_id, created_at DESC`;
    const poll = async () => {
      try {
        const rows = await sql<{ status: string }>(url, latest);
        finished = rows.filter((r) => ['completed', 'failed', 'cancelled', 'timed_out'].includes(r.status)).length;
      } catch {
        // Postgres restarting: keep the last count
      }
    };
    const plan: PlannedFault[] = [
      { at: 0.1, kind: 'redis-flush' },
      { at: 0.3, kind: 'postgres-restart' },
      { at: 0.5, kind: 'redis-restart' },
    ];
    // Faults are planned on the share of workflows started, and each start waits for the faults planned before it:
    // on a fast machine the workflows would otherwise all finish before the later faults fire.
    let started = 0;
    const supervisor = new Supervisor(workers, this.services, this.config.workflowKillEveryMs, plan, () => started / n);
    const client = new ChaosClient(workers, this.retry);
    log(`workflows: ${n} five-step workflows on 2 workers`);
    const t0 = Date.now();
    supervisor.start();
    const notStarted: string[] = [];
    await pool(ids, this.config.concurrency, async (id, i) => {
      await supervisor.reached(i / n);
      if (!(await client.send(`/wf/${id}`, id))) notStarted.push(id);
      started++;
    });
    // Faults go on until each planned one fired and then until most workflows finished or 20 s passed; then the
    // drain (every workflow ended, no more faults) is measured.
    let allFiredAt = 0;
    while (finished < n && Date.now() - t0 < this.config.drainTimeoutMs * 3) {
      if (supervisor.missed.length === 0) {
        allFiredAt ||= Date.now();
        if (finished / n >= 0.8 || Date.now() - allFiredAt >= 20_000) break;
      }
      await poll();
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    await supervisor.stop();
    const drainStart = Date.now();
    while (finished < n && Date.now() - drainStart < this.config.drainTimeoutMs) {
      await poll();
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    const drainMs = Date.now() - drainStart;
    this.faults.workflows = supervisor.events;
    const executions = await sql<{ id: string; workflow_id: string; status: string; error: { name?: string; message?: string } | null; recovery_attempts: number }>(url, latest);
    const r = this.report;
    const s = 'workflows';
    const completed = executions.filter((e) => e.status === 'completed');
    r.count(s, 'workflows started', n - notStarted.length);
    r.mustBeZero(s, 'workflows the client could not start', notStarted);
    r.count(s, 'faults: kills / Redis restarts empty / Redis flushes / Postgres restarts', faultSummary(supervisor));
    r.mustBeZero(s, 'planned faults not injected', supervisor.missed.map((f) => f.kind));
    r.mustHold(s, 'completed after the drain', `${completed.length} / ${n}`, '= 100%', completed.length === n);
    r.count(s, 'time to drain after the last fault (s)', (drainMs / 1000).toFixed(1));
    r.count(s, 'total time (s)', ((Date.now() - t0) / 1000).toFixed(1));
    const ended = executions.filter((e) => e.status !== 'completed');
    const reasons = new Map<string, number>();
    for (const e of ended) {
      const why = `${e.status}: ${e.error?.name ?? 'unfinished'}`;
      reasons.set(why, (reasons.get(why) ?? 0) + 1);
    }
    r.count(s, 'executions that ended failed, timed out or unfinished, and why', ended.length === 0 ? 0 : [...reasons].map(([k, v]) => `${v} × ${k}`).join('; '));
    const failedSteps = await sql<{ why: string; n: number }>(
      url,
      `SELECT w.name || ': ' || coalesce(left(w.error->>'message', 200), '?') AS why, count(*)::int AS n
       FROM ${LIBRARY_SCHEMA}.workflow_steps w WHERE w.status = 'failed' GROUP BY 1 ORDER BY 2 DESC LIMIT 5`,
    );
    this.failedSteps = failedSteps;
    const recoveries = executions.reduce((sum, e) => sum + e.recovery_attempts, 0);
    r.count(s, 'recoveries (interruptions the engine counted)', recoveries);
    const txCounts = await sql<{ id: string; n: number }>(
      url,
      `SELECT e.id, count(s.*)::int AS n FROM ${LIBRARY_SCHEMA}.workflow_executions e
       LEFT JOIN ${LEDGER}.step_effects s ON s.execution_id = e.id AND s.tx
       WHERE e.status = 'completed' GROUP BY e.id`,
    );
    r.mustBeZero(s, 'completed executions whose transactional step effect is not exactly 1', txCounts.filter((c) => c.n !== 1).map((c) => `${c.id} (${c.n})`));
    // A run's start is taken in the step, after the worker's read of Postgres found no checkpoint; that read's snapshot
    // is from when its statement started. A checkpoint that commits while the read is under way (both held back by a
    // Postgres restart and let go together) makes a run that started after the commit and still is an allowed rerun:
    // those within RERUN_READ_SLACK of the commit are counted, any later one is a completed step run again.
    const afterCommit = await sql<{ key: string; late: boolean }>(
      url,
      `SELECT s.step_key AS key, s.started_at > c.committed + interval '${RERUN_READ_SLACK}' AS late
         FROM ${LEDGER}.step_effects s
         JOIN ${LIBRARY_SCHEMA}.workflow_steps w ON w.execution_id = s.execution_id AND w.position = s.position,
              LATERAL (SELECT coalesce(pg_xact_commit_timestamp(w.xmin), w.completed_at) AS committed) c
        WHERE NOT s.tx AND s.started_at > c.committed`,
    );
    const reruns = afterCommit.filter((x) => x.late);
    r.mustBeZero(s, `completed plain steps run again (a run started over ${RERUN_READ_SLACK} after the checkpoint committed)`, reruns.map((x) => x.key));
    r.count(s, `plain steps whose read raced their checkpoint's commit (started within ${RERUN_READ_SLACK} after it; counted below)`, afterCommit.length - reruns.length);
    const extra = await sql<{ n: number }>(
      url,
      `SELECT coalesce(sum(c - 1), 0)::int AS n FROM (SELECT count(*) AS c FROM ${LEDGER}.step_effects WHERE NOT tx GROUP BY step_key) t`,
    );
    r.count(s, 'interrupted plain steps run again (at-least-once, counted)', Math.max(0, extra[0].n - reruns.length));
  }
}

/** How long a step worker's read of Postgres may take: a run that started within this after the checkpoint's commit may have read before it. */
const RERUN_READ_SLACK = '1 s';

function faultSummary(s: Supervisor): string {
  const n = (k: string) => s.events.filter((e) => e.kind === k).length;
  return [n('kill'), n('redis-restart'), n('redis-flush'), n('postgres-restart')].join(' / ');
}

async function main(): Promise<number> {
  const config = chaosConfig(process.argv.slice(2));
  log(`profile ${config.profile}: ${JSON.stringify(config)}`);
  const run = new ChaosRun(config);
  let interrupted = false;
  const onSignal = () => {
    if (interrupted) return;
    interrupted = true;
    log('interrupted: stopping everything this run started');
    void run.cleanup(true).finally(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('uncaughtException', (err) => {
    log(`failed: ${err.stack ?? String(err)}`);
    onSignal();
  });
  const t0 = Date.now();
  try {
    await run.run();
  } finally {
    if (!interrupted) await run.cleanup(!process.env.CHAOS_KEEP_DATA);
  }
  const table = run.report.table();
  process.stdout.write(`\n${table}\n\n`);
  const file = run.report.write(OUT, {
    config,
    machine: { cpus: (await import('node:os')).cpus().length, loadavg: (await import('node:os')).loadavg() },
    durationSeconds: Math.round((Date.now() - t0) / 1000),
    logs: LOGS,
    faults: run.faultLog,
    unexpectedAnswers: run.unexpected,
    failedSteps: run.failedSteps,
  });
  const failed = run.report.failed;
  log(`${failed.length === 0 ? 'every invariant held' : `${failed.length} invariant(s) broke`}; report: ${file}; ${Math.round((Date.now() - t0) / 1000)} s`);
  return failed.length === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`[chaos] failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(2);
  },
);
