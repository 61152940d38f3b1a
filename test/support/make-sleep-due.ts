import { sql } from './test-app';

/**
 * Makes the sleep of a suspended execution (workflow id `workflowId`) due now, the way time passing would: its
 * `suspended_until` becomes now (so the reconciler promotes its delayed job, or re-adds a lost one without delay),
 * and its stored wake-up time becomes now + `wakeInMs`. With `wakeInMs` > 0 the run is woken early, like the
 * job of a sleep normally is: the replayed sleep must still wait for the stored time. Returns that stored time.
 * Tests sleep for an hour and call this once they have observed what they need, instead of racing a short sleep.
 */
export async function makeSleepDue(schema: string, workflowId: string, wakeInMs = 0): Promise<Date> {
  const rows = await sql<{ wake_at: Date }>(
    `WITH x AS (
       UPDATE "${schema}".workflow_executions SET suspended_until = now()
        WHERE workflow_id = $1 AND status = 'pending' AND suspended_until IS NOT NULL
       RETURNING id
     )
     UPDATE "${schema}".workflow_waits w SET wake_at = now() + $2::int * interval '1 millisecond'
       FROM x WHERE w.execution_id = x.id AND w.kind = 'sleep'
     RETURNING w.wake_at`,
    [workflowId, wakeInMs],
  );
  if (rows.length !== 1) throw new Error(`expected one sleeping execution of ${workflowId}, found ${rows.length}`);
  return rows[0].wake_at;
}
