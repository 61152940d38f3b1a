import { join } from 'node:path';
import { sql } from '../support/test-app';
import { Child, kill, spawnWorker } from '../workflow/processes';
import { scenario, Scenario } from '../workflow/support';

jest.setTimeout(120_000); // real processes; every wait below is bounded

const FIXTURE = join(__dirname, 'fixtures', 'schedule-process.ts');

/** Scheduled times (ms) of the ticker's executions, ascending. */
async function occurrences(s: Scenario): Promise<number[]> {
  const rows = await sql<{ workflow_id: string }>(`SELECT workflow_id FROM "${s.schema}".workflow_executions WHERE workflow_name = 'ticker'`);
  return rows.map((r) => Date.parse(r.workflow_id.slice('ticker@'.length))).sort((a, b) => a - b);
}

/** Polls until `check` returns a value (not undefined), for at most `timeoutMs`. */
async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe('@Scheduled: a per-second cron', () => {
  const children: Child[] = [];
  afterAll(async () => {
    for (const child of children) await kill(child, 'SIGTERM');
  });

  it('run by three instances for 10 occurrences starts each occurrence exactly once, none skipped', async () => {
    const s = scenario();
    const three = [0, 1, 2].map(() => spawnWorker(s, {}, FIXTURE));
    children.push(...three);
    const ready = Math.max(...(await Promise.all(three.map(async (c) => Number((await c.line('READY')).split(' ')[1])))));
    // 10 occurrences after every instance runs, each run to its step.
    await until('10 occurrences', async () => {
      const [{ n }] = await sql<{ n: number }>(
        `SELECT count(DISTINCT workflow_id)::int AS n FROM "${s.schema}".step_runs WHERE step = 'tick' AND split_part(workflow_id, '@', 2)::timestamptz > to_timestamp($1::float8 / 1000)`,
        [ready],
      );
      return n >= 10 ? n : undefined;
    });
    for (const child of three) await kill(child, 'SIGTERM');
    const perOccurrence = await sql<{ workflow_id: string; executions: number; runs: number }>(
      `SELECT e.workflow_id, count(DISTINCT e.id)::int AS executions, (SELECT count(*)::int FROM "${s.schema}".step_runs r WHERE r.workflow_id = e.workflow_id AND r.step = 'tick') AS runs
       FROM "${s.schema}".workflow_executions e WHERE e.workflow_name = 'ticker' AND e.status = 'completed' GROUP BY e.workflow_id`,
    );
    expect(perOccurrence.length).toBeGreaterThanOrEqual(10);
    expect(perOccurrence.filter((o) => o.executions !== 1 || o.runs !== 1)).toEqual([]);
    // Every second from the first occurrence to the last has its run: no occurrence was skipped either.
    const times = await occurrences(s);
    expect((times[times.length - 1] - times[0]) / 1000 + 1).toBe(times.length);
    const [{ pids }] = await sql<{ pids: number }>(`SELECT count(DISTINCT pid)::int AS pids FROM "${s.schema}".step_runs`);
    expect(pids).toBeGreaterThanOrEqual(2); // the occurrences were shared out, not all run by one instance
  });

  describe.each(['none', 'latest', 'all'] as const)("catchUp '%s' after a 5-second outage of every instance", (catchUp) => {
    const s = scenario();
    let before: number; // the newest occurrence started before the outage
    let outage: [number, number]; // no instance ran in between
    let row: { through: number; missed: number; started: number };

    beforeAll(async () => {
      const first = spawnWorker(s, { SCHED_CATCH_UP: catchUp }, FIXTURE);
      children.push(first);
      await first.line('READY');
      await until('3 occurrences', async () => ((await occurrences(s)).length >= 3 ? true : undefined));
      await kill(first, 'SIGTERM');
      before = Math.max(...(await occurrences(s)));
      const stoppedAt = Date.now();
      await new Promise((resolve) => setTimeout(resolve, 5000));
      const second = spawnWorker(s, { SCHED_CATCH_UP: catchUp }, FIXTURE);
      children.push(second);
      outage = [stoppedAt, Date.now()];
      const ready = Number((await second.line('READY')).split(' ')[1]);
      // The schedule is running again: two on-time occurrences after the restart.
      await until('occurrences after the restart', async () => ((await occurrences(s)).filter((t) => t > ready).length >= 2 ? true : undefined));
      await kill(second, 'SIGTERM');
      const [r] = await sql<{ through: number; missed: number; started: number }>(
        `SELECT (extract(epoch FROM caught_up_through) * 1000)::float8 AS through, caught_up_missed AS missed, caught_up_started AS started
         FROM "${s.schema}".idempotency_schedules WHERE name = 'ticker'`,
      );
      row = r;
    }, 120_000);

    it('finds every occurrence of the outage missed (from Postgres, BullMQ does not replay them)', () => {
      const [stoppedAt, restartedAt] = outage;
      // At least the whole seconds during which no process ran, and none from before the outage.
      expect(row.missed).toBeGreaterThanOrEqual(Math.floor((restartedAt - stoppedAt) / 1000) - 1);
      expect(row.missed).toBe((row.through - before) / 1000);
    });

    it(`runs ${catchUp === 'none' ? 'none of them' : catchUp === 'latest' ? 'only the latest' : 'each of them'}, then the schedule goes on`, async () => {
      const times = await occurrences(s);
      const caughtUp = times.filter((t) => t > before && t <= row.through);
      const expected = { none: [], latest: [row.through], all: Array.from({ length: row.missed }, (_, i) => before + (i + 1) * 1000) }[catchUp];
      expect(caughtUp).toEqual(expected);
      expect(row.started).toBe(expected.length);
      expect(times.filter((t) => t > row.through).length).toBeGreaterThanOrEqual(2);
    });
  });
});
