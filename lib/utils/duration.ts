/** A duration: milliseconds as a number, or a string such as `"500ms"`, `"30s"`, `"5m"`, `"24h"`, `"7d"`, `"0"`. */
export type Duration = number | string;

const UNIT_MS: Record<string, number> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
};

/**
 * The longest duration accepted: 1000 years (of 365.25 days). Within it, Postgres timestamp arithmetic cannot leave
 * its range (`now() - 1000 years` for retention cutoffs, `now() + 1000 years` for expiries) and milliseconds stay exact.
 */
export const MAX_DURATION_MS = 1000 * 365.25 * 86_400_000;

const PATTERN = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?$/;

/**
 * Parses a {@link Duration} into milliseconds, or returns an explanation of why it is invalid.
 * Kept free of exceptions so option validation can report every bad option with its name.
 */
export function parseDuration(value: unknown): number | { error: string } {
  const ms = toMilliseconds(value);
  if (typeof ms === 'number' && ms > MAX_DURATION_MS) return { error: `at most 1000 years ("365250d", ${MAX_DURATION_MS} ms), got ${JSON.stringify(value)}` };
  return ms;
}

function toMilliseconds(value: unknown): number | { error: string } {
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0) return { error: `expected a non-negative number of milliseconds, got ${value}` };
    return Math.round(value);
  }
  if (typeof value !== 'string') return { error: `expected milliseconds or a string like "30s", got ${typeof value}` };
  const match = PATTERN.exec(value.trim());
  if (!match) return { error: `"${value}" is not a duration; use milliseconds or a number with ms, s, m, h, d or w (e.g. "30s", "24h", "7d")` };
  const amount = Number(match[1]);
  const unit = match[2] ?? 'ms';
  return Math.round(amount * UNIT_MS[unit]);
}
