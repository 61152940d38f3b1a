// Counting, the way Jepsen counts: every effect is a ledger row; what clients saw is compared with what the ledger
// holds. Nothing here decides by the library's own records except "still in progress".
import type { Seen } from './client';

/** One row of the effects ledger. */
export interface Effect {
  key: string;
  runId: string;
  pid: number;
  at: number;
}

/** Why a key has more than one effect, for handlers outside the library's transaction (at-least-once). */
export interface DuplicateCauses {
  /** Every extra run happened in a process that was SIGKILLed afterwards. */
  byKill: number;
  /** An extra run overlapped a Postgres restart (the outcome could not be stored; the key was released). */
  byPostgresRestart: number;
  /** Any other: a failure. */
  unexplained: string[];
}

export interface EffectCounts {
  keys: number;
  /** Keys a client saw answered 2xx whose ledger holds no effect. */
  lostWork: string[];
  /** 2xx answers naming a run whose effect is not in the ledger (a response for rolled-back work). */
  answersWithoutEffect: string[];
  /** Keys with more than one effect. */
  multiEffect: string[];
  /** Replays (or later answers) whose run differs from the first answer's. */
  replayMismatch: string[];
  causes: DuplicateCauses;
}

export function byKey(effects: Effect[]): Map<string, Effect[]> {
  const map = new Map<string, Effect[]>();
  for (const effect of effects) {
    const list = map.get(effect.key) ?? [];
    list.push(effect);
    map.set(effect.key, list);
  }
  return map;
}

/** The run id an answer names (handlers answer `{ key, runId, pid }`). */
export function runIdOf(seen: Seen): string | undefined {
  try {
    return (JSON.parse(seen.body) as { runId?: string }).runId;
  } catch {
    return undefined;
  }
}

/**
 * Counts one handler's keys. `sameBytes`: replays must carry the first answer's bytes (HTTP); otherwise the same run
 * (a guarded method's stored result may list its keys in another order). `killedPids` and `postgresWindows` explain
 * extra effects of non-transactional handlers.
 */
export function countEffects(
  keys: string[],
  effects: Map<string, Effect[]>,
  seenOf: (key: string) => Seen[],
  options: { sameBytes: boolean; killedPids: Set<number>; postgresWindows: [number, number][] },
): EffectCounts {
  const counts: EffectCounts = {
    keys: keys.length,
    lostWork: [],
    answersWithoutEffect: [],
    multiEffect: [],
    replayMismatch: [],
    causes: { byKill: 0, byPostgresRestart: 0, unexplained: [] },
  };
  for (const key of keys) {
    const rows = effects.get(key) ?? [];
    const seen = seenOf(key);
    if (seen.length > 0 && rows.length === 0) counts.lostWork.push(key);
    const runs = new Set(rows.map((r) => r.runId));
    if (seen.some((s) => runIdOf(s) !== undefined && !runs.has(runIdOf(s) as string))) counts.answersWithoutEffect.push(key);
    const first = seen[0];
    const differs = (s: Seen) => (options.sameBytes ? s.body !== first.body : runIdOf(s) !== runIdOf(first));
    if (first && seen.slice(1).some((s) => (options.sameBytes ? s.replayed : true) && differs(s))) counts.replayMismatch.push(key);
    if (rows.length <= 1) continue;
    counts.multiEffect.push(key);
    // The run whose answer was stored is the one replays name; every other run needs a cause.
    const stored = [...seen].reverse().find((s) => s.replayed) ?? seen[seen.length - 1];
    const extras = rows.filter((r) => r.runId !== (stored && runIdOf(stored)));
    if (extras.every((r) => options.killedPids.has(r.pid))) counts.causes.byKill++;
    else if (extras.every((r) => options.killedPids.has(r.pid) || options.postgresWindows.some(([a, b]) => r.at >= a && r.at <= b))) {
      counts.causes.byPostgresRestart++;
    } else counts.causes.unexplained.push(key);
  }
  return counts;
}
