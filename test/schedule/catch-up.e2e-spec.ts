import { sql } from '../support/test-app';
import { Child, kill, spawnWorker } from '../workflow/processes';
import { scenario, Scenario } from '../workflow/support';
import { occurrences, SCHEDULE_FIXTURE, tickerEnv, until } from './support';
import type { CatchUp } from '../../lib';

jest.setTimeout(120_000); // real processes; every wait below is bounded

interface Outcome {
  before: number; // the newest occurrence started before the outage
  stoppedAt: number;
  restartedAt: number; // no instance ran between these two
  row: { through: number; missed: number; started: number }; // the schedule's last catch-up, as stored
  times: number[];
}

const children: Child[] = [];

/** One instance runs the ticker; it stops; 5 s later (no instance running) another one starts. */
async function outage(s: Scenario, catchUp: CatchUp): Promise<Outcome> {
  const first = spawnWorker(s, tickerEnv(catchUp), SCHEDULE_FIXTURE);
  children.push(first);
  await first.line('READY');
  await until('3 occurrences', async () => ((await occurrences(s)).length >= 3 ? true : undefined));
  await kill(first, 'SIGTERM');
  const before = Math.max(...(await occurrences(s)));
  const stoppedAt = Date.now();
  await new Promise((resolve) => setTimeout(resolve, 5000));
  const second = spawnWorker(s, tickerEnv(catchUp), SCHEDULE_FIXTURE);
  children.push(second);
  const restartedAt = Date.now();
  const ready = Number((await second.line('READY')).split(' ')[1]);
  // The schedule is running again: two on-time occurrences after the restart.
  await until('occurrences after the restart', async () => ((await occurrences(s)).filter((t) => t > ready).length >= 2 ? true : undefined));
  await kill(second, 'SIGTERM');
  const [row] = await sql<Outcome['row']>(
    `SELECT (extract(epoch FROM caught_up_through) * 1000)::float8 AS through, caught_up_missed AS missed, caught_up_started AS started
     FROM "${s.schema}".idempotency_schedules WHERE name = 'ticker'`,
  );
  return { before, stoppedAt, restartedAt, row, times: await occurrences(s) };
}

describe('@Scheduled catch-up after a 5-second outage of every instance', () => {
  const modes = ['none', 'latest', 'all'] as const;
  const outcomes = new Map<CatchUp, Outcome>();

  beforeAll(async () => {
    // The three settings run side by side, each in its own schema and queues.
    const results = await Promise.all(modes.map((mode) => outage(scenario(), mode)));
    modes.forEach((mode, i) => outcomes.set(mode, results[i]));
  }, 120_000);
  afterAll(async () => {
    for (const child of children) await kill(child, 'SIGTERM');
  });

  it.each(modes)("catchUp '%s': every occurrence of the outage is found missed, from the mark in Postgres", (mode) => {
    const { before, stoppedAt, restartedAt, row } = outcomes.get(mode)!;
    // At least the whole seconds during which no process ran, and none from before the outage.
    expect(row.missed).toBeGreaterThanOrEqual(Math.floor((restartedAt - stoppedAt) / 1000) - 1);
    expect(row.missed).toBe((row.through - before) / 1000);
  });

  it.each(modes)("catchUp '%s': runs none / only the latest / each of them, then the schedule goes on", (mode) => {
    const { before, row, times } = outcomes.get(mode)!;
    const caughtUp = times.filter((t) => t > before && t <= row.through);
    const expected = { none: [], latest: [row.through], all: Array.from({ length: row.missed }, (_, i) => before + (i + 1) * 1000) }[mode];
    expect(caughtUp).toEqual(expected);
    expect(row.started).toBe(expected.length);
    expect(times.filter((t) => t > row.through).length).toBeGreaterThanOrEqual(2);
  });
});
