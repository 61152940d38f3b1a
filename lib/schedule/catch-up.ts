import type { CatchUp } from './schedule.interfaces';
import { CATCH_UP_ALL_LIMIT } from './schedule.constants';

/** Of the missed occurrences (oldest first), those that `catchUp` runs. */
export function missedToRun(catchUp: CatchUp, missed: number[]): number[] {
  if (catchUp === 'none') return [];
  if (catchUp === 'latest') return missed.slice(-1);
  return missed.slice(-CATCH_UP_ALL_LIMIT);
}

/** Validates `@Scheduled()` / `schedule()` options other than the cron; returns each problem as `option: message`. */
export function scheduleOptionProblems(options: unknown, allowed: readonly string[] = ['timezone', 'catchUp']): string[] {
  if (options === undefined) return [];
  if (typeof options !== 'object' || options === null) return [`options: expected { ${allowed.join('?, ')}? }`];
  const problems: string[] = [];
  for (const key of Object.keys(options)) {
    if (!allowed.includes(key)) problems.push(`${key}: unknown option; use ${allowed.join(', ')}`);
  }
  const { catchUp } = options as { catchUp?: unknown };
  if (catchUp !== undefined && catchUp !== 'none' && catchUp !== 'latest' && catchUp !== 'all') {
    problems.push(`catchUp: expected 'none', 'latest' or 'all', got ${JSON.stringify(catchUp)}`);
  }
  return problems;
}
