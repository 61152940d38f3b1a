import { createRequire } from 'node:module';
import { loadPeer } from '../utils/optional-peer';

interface CronIterator {
  next(): { getTime(): number };
  prev(): { getTime(): number };
}
type Parse = (expression: string, options: { currentDate: Date; tz?: string }) => CronIterator;

let parse: Parse | undefined;

/** The cron parser BullMQ itself uses (its own dependency, so schedules and our catch-up read a cron alike). */
function parser(): Parse {
  if (parse) return parse;
  loadPeer('bullmq', 'schedules (@Scheduled())');
  const fromBullmq = createRequire(require.resolve('bullmq'));
  const mod = fromBullmq('cron-parser') as { CronExpressionParser?: { parse: Parse }; parseExpression?: Parse };
  // cron-parser 5 (BullMQ 5.5x+ and 6) exports CronExpressionParser; 4 exports parseExpression.
  const found: Parse | undefined = mod.CronExpressionParser ? (e, o) => mod.CronExpressionParser!.parse(e, o) : mod.parseExpression;
  if (!found) throw new Error('the cron-parser that bullmq depends on has neither CronExpressionParser nor parseExpression');
  return (parse = found);
}

/** Why a time zone is not valid, or undefined when it is. */
export function timezoneProblem(timezone: unknown): string | undefined {
  if (timezone === undefined) return undefined;
  if (typeof timezone !== 'string' || timezone.length === 0) return `expected an IANA time zone such as "Europe/Paris", got ${JSON.stringify(timezone)}`;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
    return undefined;
  } catch {
    return `"${timezone}" is not an IANA time zone (e.g. "UTC", "Europe/Paris", "America/New_York")`;
  }
}

/** Why a cron expression is not valid, or undefined when it is (5 fields, or 6 with seconds first). */
export function cronProblem(cron: unknown, timezone?: string): string | undefined {
  if (typeof cron !== 'string' || cron.trim().length === 0) return `expected a cron expression such as "0 3 * * *", got ${JSON.stringify(cron)}`;
  const fields = cron.trim().split(/\s+/).length;
  if (fields < 5 || fields > 6) return `"${cron}" has ${fields} fields; use 5 (minute hour day month weekday) or 6 (seconds first)`;
  try {
    parser()(cron, { currentDate: new Date(), ...(timezone ? { tz: timezone } : {}) }).next();
    return undefined;
  } catch (err) {
    return `"${cron}" is not a valid cron expression: ${(err as Error).message}`;
  }
}

/** The first occurrence strictly after `afterMs`. */
export function nextOccurrence(cron: string, timezone: string | undefined, afterMs: number): number {
  return parser()(cron, { currentDate: new Date(afterMs), ...(timezone ? { tz: timezone } : {}) }).next().getTime();
}

/**
 * Occurrences in (afterMs, upToMs]: the newest `limit` of them, oldest first, and how many there are (counting stops
 * at `limit + 1`, so a long outage of a frequent cron costs at most that many steps).
 */
export function occurrencesBetween(cron: string, timezone: string | undefined, afterMs: number, upToMs: number, limit: number): { newest: number[]; count: number } {
  const newest: number[] = [];
  if (upToMs <= afterMs) return { newest, count: 0 };
  const iterator = parser()(cron, { currentDate: new Date(upToMs + 1), ...(timezone ? { tz: timezone } : {}) });
  let count = 0;
  while (count <= limit) {
    const at = iterator.prev().getTime();
    if (at <= afterMs) break;
    count++;
    if (newest.length < limit) newest.unshift(at);
  }
  return { newest, count };
}
