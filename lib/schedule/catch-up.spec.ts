import { missedToRun } from './catch-up';
import { cronProblem, nextOccurrence, occurrencesBetween, timezoneProblem } from './cron';
import { CATCH_UP_ALL_LIMIT, occurrenceId } from './schedule.constants';

const T0 = Date.parse('2026-01-01T00:00:00.000Z');

describe('schedule occurrences and catch-up', () => {
  it('lists the occurrences in (after, upTo], newest kept, counting one past the limit', () => {
    expect(occurrencesBetween('* * * * * *', undefined, T0, T0 + 5000, 100)).toEqual({ newest: [1, 2, 3, 4, 5].map((s) => T0 + s * 1000), count: 5 });
    expect(occurrencesBetween('* * * * * *', undefined, T0, T0 + 5000, 2)).toEqual({ newest: [T0 + 4000, T0 + 5000], count: 3 });
    expect(occurrencesBetween('* * * * * *', undefined, T0, T0, 100)).toEqual({ newest: [], count: 0 });
    expect(occurrencesBetween('0 3 * * *', 'Europe/Paris', T0, T0 + 3 * 86_400_000, 100).newest.map((t) => new Date(t).toISOString())).toEqual([
      '2026-01-01T02:00:00.000Z', '2026-01-02T02:00:00.000Z', '2026-01-03T02:00:00.000Z',
    ]);
    expect(nextOccurrence('0 3 * * *', undefined, T0)).toBe(T0 + 3 * 3_600_000);
  });

  it("runs none, the latest, or each of the newest 100 missed occurrences", () => {
    const missed = Array.from({ length: 150 }, (_, i) => i);
    expect(missedToRun('none', missed)).toEqual([]);
    expect(missedToRun('latest', missed)).toEqual([149]);
    expect(missedToRun('all', missed)).toEqual(missed.slice(-CATCH_UP_ALL_LIMIT));
    expect(missedToRun('latest', [])).toEqual([]);
  });

  it('names an occurrence <name>@<time ISO> and explains a bad cron or time zone', () => {
    expect(occurrenceId('daily-report', T0)).toBe('daily-report@2026-01-01T00:00:00.000Z');
    expect(cronProblem('0 3 * * *')).toBeUndefined();
    expect(cronProblem('every day')).toMatch(/has 2 fields/);
    expect(cronProblem('61 * * * *')).toMatch(/not a valid cron expression/);
    expect(timezoneProblem('Europe/Paris')).toBeUndefined();
    expect(timezoneProblem('Mars/Olympus')).toMatch(/not an IANA time zone/);
  });
});
