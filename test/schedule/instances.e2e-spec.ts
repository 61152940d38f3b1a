import { sql } from '../support/test-app';
import { Child, kill, spawnWorker } from '../workflow/processes';
import { scenario } from '../workflow/support';
import { occurrences, SCHEDULE_FIXTURE, tickerEnv, until } from './support';

jest.setTimeout(120_000); // three real processes; every wait below is bounded

describe('@Scheduled: a per-second cron run by three instances', () => {
  const children: Child[] = [];
  afterAll(async () => {
    for (const child of children) await kill(child, 'SIGTERM');
  });

  it('10 occurrences: each starts exactly once, none skipped', async () => {
    const s = scenario();
    const three = [0, 1, 2].map(() => spawnWorker(s, tickerEnv('all'), SCHEDULE_FIXTURE));
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
    // Every second from the first occurrence to the last has its run: none was skipped either (catchUp 'all' also
    // starts an occurrence whose job BullMQ skipped because the one before it ran late on a loaded machine).
    const times = await occurrences(s);
    expect((times[times.length - 1] - times[0]) / 1000 + 1).toBe(times.length);
    const [{ pids }] = await sql<{ pids: number }>(`SELECT count(DISTINCT pid)::int AS pids FROM "${s.schema}".step_runs`);
    expect(pids).toBeGreaterThanOrEqual(2); // the occurrences were shared out, not all run by one instance
  });
});
