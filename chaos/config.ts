// Counts and timings of a chaos run: a profile (`--profile full|ci|smoke`) overridden by CHAOS_* environment variables.

export interface ChaosConfig {
  profile: string;
  /** HTTP scenario: keyed requests (half to the transactional handler, half to the plain one). */
  httpKeys: number;
  /** Share of keys sent again as duplicates (at once to the other instance, later to either). */
  duplicateRate: number;
  guardKeys: number;
  inboxMessages: number;
  workflows: number;
  /** App instances of the HTTP, guard and inbox scenarios; the workflow scenario runs two workers. */
  instances: number;
  concurrency: number;
  /** Mean time between two SIGKILLs of an instance (jittered ±50%). */
  killEveryMs: number;
  /** The same for the workflow workers: each kill interrupts every execution the worker drives. */
  workflowKillEveryMs: number;
  /** The library's lease (http.lockTimeout and the guard's lockTimeout). */
  lease: string;
  handlerMs: number;
  stepMs: number;
  retryAttempts: number;
  /** Bound on waiting for every workflow to end after the faults stopped. */
  drainTimeoutMs: number;
  /** An invariant to break on purpose, to show the run fails ("tx-outside"). */
  breakInvariant?: string;
}

const PROFILES: Record<string, Omit<ChaosConfig, 'profile' | 'breakInvariant'>> = {
  full: {
    httpKeys: 10_000, duplicateRate: 0.3, guardKeys: 1_000, inboxMessages: 1_000, workflows: 1_000, instances: 2,
    concurrency: 24, killEveryMs: 4_000, workflowKillEveryMs: 6_000, lease: '2s', handlerMs: 20, stepMs: 30, retryAttempts: 10, drainTimeoutMs: 180_000,
  },
  ci: {
    httpKeys: 800, duplicateRate: 0.3, guardKeys: 200, inboxMessages: 200, workflows: 100, instances: 2,
    concurrency: 16, killEveryMs: 3_000, workflowKillEveryMs: 3_000, lease: '2s', handlerMs: 20, stepMs: 30, retryAttempts: 10, drainTimeoutMs: 90_000,
  },
  smoke: {
    httpKeys: 300, duplicateRate: 0.3, guardKeys: 100, inboxMessages: 100, workflows: 60, instances: 2,
    concurrency: 8, killEveryMs: 3_000, workflowKillEveryMs: 3_000, lease: '2s', handlerMs: 20, stepMs: 30, retryAttempts: 10, drainTimeoutMs: 60_000,
  },
};

function numberFrom(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a non-negative number, got "${raw}"`);
  return value;
}

/** Reads `--profile <name>` from argv and the CHAOS_* overrides. */
export function chaosConfig(argv: string[]): ChaosConfig {
  const flag = argv.indexOf('--profile');
  const profile = flag >= 0 ? argv[flag + 1] : (process.env.CHAOS_PROFILE ?? 'full');
  const base = PROFILES[profile];
  if (!base) throw new Error(`unknown profile "${profile}": use one of ${Object.keys(PROFILES).join(', ')}`);
  return {
    profile,
    httpKeys: numberFrom('CHAOS_HTTP_KEYS', base.httpKeys),
    duplicateRate: numberFrom('CHAOS_DUPLICATE_RATE', base.duplicateRate),
    guardKeys: numberFrom('CHAOS_GUARD_KEYS', base.guardKeys),
    inboxMessages: numberFrom('CHAOS_INBOX_MESSAGES', base.inboxMessages),
    workflows: numberFrom('CHAOS_WORKFLOWS', base.workflows),
    instances: Math.max(2, numberFrom('CHAOS_INSTANCES', base.instances)),
    concurrency: Math.max(1, numberFrom('CHAOS_CONCURRENCY', base.concurrency)),
    killEveryMs: numberFrom('CHAOS_KILL_EVERY_MS', base.killEveryMs),
    workflowKillEveryMs: numberFrom('CHAOS_WORKFLOW_KILL_EVERY_MS', base.workflowKillEveryMs),
    lease: process.env.CHAOS_LEASE ?? base.lease,
    handlerMs: numberFrom('CHAOS_HANDLER_MS', base.handlerMs),
    stepMs: numberFrom('CHAOS_STEP_MS', base.stepMs),
    retryAttempts: Math.max(1, numberFrom('CHAOS_RETRY_ATTEMPTS', base.retryAttempts)),
    drainTimeoutMs: numberFrom('CHAOS_DRAIN_TIMEOUT_MS', base.drainTimeoutMs),
    breakInvariant: process.env.CHAOS_BREAK || undefined,
  };
}
