import { join } from 'node:path';
import { sql } from '../support/test-app';
import type { Scenario } from '../workflow/support';

/** The process that runs the per-second ticker schedule. */
export const SCHEDULE_FIXTURE = join(__dirname, '..', 'queues', 'fixtures', 'worker-app.ts');

/** Environment of a ticker process: the ticker workflow, with this catchUp. */
export function tickerEnv(catchUp = 'latest'): Record<string, string> {
  return { APP_WORKFLOW: 'ticker', SCHED_CATCH_UP: catchUp };
}

/** Scheduled times (ms) of the ticker's executions, ascending (from their ids, `ticker@<time ISO>`). */
export async function occurrences(s: Scenario): Promise<number[]> {
  const rows = await sql<{ workflow_id: string }>(`SELECT workflow_id FROM "${s.schema}".workflow_executions WHERE workflow_name = 'ticker'`);
  return rows.map((r) => Date.parse(r.workflow_id.slice('ticker@'.length))).sort((a, b) => a - b);
}

/** Polls until `check` returns a value (not undefined), for at most `timeoutMs`. */
export async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
