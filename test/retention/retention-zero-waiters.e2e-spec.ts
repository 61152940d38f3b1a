import { INestApplication } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { RetentionService, Step, Workflow, WorkflowClient, WorkflowFailedError, WorkflowNotFoundError, WorkflowStore } from '../../lib';
import { gate, waitUntil } from '../support/resilience';
import { sql } from '../support/test-app';
import { BranchesWorkflow, BranchProbe } from '../workflow/fixtures/branches.workflow';
import { Child, kill, spawnWorker } from '../workflow/processes';
import { bootWorkflowApp, scenario } from '../workflow/support';

jest.setTimeout(60_000); // real processes and servers; waits are bounded by the assertions' own timeouts

/** Holds every `double` step until the test opens it (once the waiters it needs are registered). */
let hold = gate();

@Workflow({ name: 'ephemeral', retention: '0' })
class EphemeralWorkflow {
  async run(input: { n: number; fail?: boolean }): Promise<number> {
    const doubled = await this.double(input.n);
    if (input.fail) throw new Error(`refused ${input.n}`);
    return doubled;
  }

  @Step()
  async double(n: number): Promise<number> {
    await hold.promise;
    await sleep(20 + (n % 5) * 15); // released together, they still finish at different times
    return n * 2;
  }
}


/** The result() waiters registered on one execution. */
const waiters = async (schema: string, id: string) =>
  (await sql<{ n: number }>(`SELECT result_waiters AS n FROM "${schema}".workflow_executions WHERE id = $1`, [id]))[0]?.n;

/** How many of the executions are still stored (and match `where`). */
const remaining = async (schema: string, ids: string[], where = 'true') =>
  (await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "${schema}".workflow_executions WHERE id = ANY($1::uuid[]) AND ${where}`, [ids]))[0].n;

/** How many of the executions have at least one registered result() waiter. */
const watched = (schema: string, ids: string[]) => remaining(schema, ids, 'result_waiters > 0');

// Issue 16 item 5: retention "0" removes a finished execution only once every result() call that was waiting for
// it has read its outcome; a result() call made after that gets WorkflowNotFoundError.
describe('retention "0" and result() waiters', () => {
  describe('waiters in the worker process', () => {
    const s = scenario();
    let app: INestApplication;
    let client: WorkflowClient;

    beforeAll(async () => {
      ({ app, client } = await bootWorkflowApp(s, [EphemeralWorkflow], { concurrency: 20 }));
    });
    afterAll(async () => {
      hold.open(); // a failed test leaves no step held across the close
      await app?.close();
    });

    it('20 executions, result() called on each while it runs: every call gets its outcome, then the rows are gone', async () => {
      hold = gate();
      const handles = await Promise.all(Array.from({ length: 20 }, (_, n) => client.start(EphemeralWorkflow, { n }, { workflowId: `eph-${n}` })));
      const ids = handles.map((h) => h.executionId);
      const pending = Promise.all(handles.map((h) => h.result({ timeout: '30s' }).catch((err: Error) => err.name)));
      // The executions finish only once every result() call is registered as a waiter (none ends unwatched).
      await waitUntil('every execution has its waiter', async () => (await watched(s.schema, ids)) === 20);
      hold.open();
      const outcomes = await pending;
      expect(outcomes).toEqual(Array.from({ length: 20 }, (_, n) => n * 2));
      await waitUntil('removed after the waiters read them', async () => (await remaining(s.schema, ids)) === 0);
      // Afterwards the execution is gone: a new result() call cannot find it.
      await expect(handles[0].result()).rejects.toBeInstanceOf(WorkflowNotFoundError);
    });

    it('several waiters on one execution, and a failure: each waiter gets the outcome', async () => {
      hold = gate();
      const handle = await client.start(EphemeralWorkflow, { n: 4, fail: true }, { workflowId: 'eph-fail' });
      const pending = Promise.all([1, 2, 3].map(() => handle.result({ timeout: '30s' }).catch((err: unknown) => err)));
      await waitUntil('all three waiters registered', async () => (await waiters(s.schema, handle.executionId)) === 3);
      hold.open();
      const outcomes = await pending;
      for (const outcome of outcomes) {
        expect(outcome).toBeInstanceOf(WorkflowFailedError);
        expect((outcome as WorkflowFailedError).error.message).toBe('refused 4');
      }
      await waitUntil('removed after the waiters read it', async () => (await remaining(s.schema, [handle.executionId])) === 0);
    });
  });

  describe('a waiter that died while registered', () => {
    const s = scenario();
    let app: INestApplication;
    let client: WorkflowClient;

    beforeAll(async () => {
      ({ app, client } = await bootWorkflowApp(s, [EphemeralWorkflow], {}, { retention: { cleanupInterval: false } }));
    });
    afterAll(async () => {
      hold.open(); // a failed test leaves no step held across the close
      await app?.close();
    });

    it('keeps the execution for its waiter, and cleanup removes it an hour after it finished', async () => {
      hold = gate();
      const handle = await client.start(EphemeralWorkflow, { n: 7 }, { workflowId: 'eph-orphan' });
      // A waiter registers and its process dies before reading: the count is never given back.
      expect((await app.get(WorkflowStore).watch(handle.executionId))?.watching).toBe(true);
      hold.open(); // only now may it finish: the waiter registered while it ran
      await waitUntil('finished', async () => (await handle.status()) === 'completed');
      const retention = app.get(RetentionService);
      await retention.cleanup();
      expect(await remaining(s.schema, [handle.executionId])).toBe(1);
      await sql(`UPDATE "${s.schema}".workflow_executions SET completed_at = now() - interval '61 minutes' WHERE id = $1`, [handle.executionId]);
      await retention.cleanup();
      expect(await remaining(s.schema, [handle.executionId])).toBe(0);
    });
  });

  describe('waiters in another process than the worker', () => {
    const s = scenario();
    let app: INestApplication;
    let client: WorkflowClient;
    let worker: Child | undefined;

    beforeAll(async () => {
      // This process only starts and waits (it polls: no worker here); the child runs the workflows.
      ({ app, client } = await bootWorkflowApp(s, [BranchesWorkflow, BranchProbe], { workers: false }, { retention: { workflows: '0', cleanupInterval: false } }));
      worker = spawnWorker(s, { WF_RETENTION: '0' });
      await worker.line('READY');
    });
    afterAll(async () => {
      await kill(worker);
      await app?.close();
    });

    it('every waiting result() gets its outcome, then the rows are gone', async () => {
      // Each run holds in its `finish` step until the test writes a 'release' row for its workflow id.
      const handles = await Promise.all(
        Array.from({ length: 10 }, (_, i) => client.start(BranchesWorkflow, { items: [`x${i}`], holdFinish: true }, { workflowId: `eph-x${i}` })),
      );
      const ids = handles.map((h) => h.executionId);
      const pending = Promise.all(handles.map((h) => h.result({ timeout: '30s' }).catch((err: Error) => err.name)));
      await waitUntil('every execution has its waiter', async () => (await watched(s.schema, ids)) === 10);
      await sql(`INSERT INTO "${s.schema}".step_runs (workflow_id, step, phase, pid) SELECT id, 'release', 'done', 0 FROM unnest($1::text[]) id`, [
        handles.map((h) => h.workflowId),
      ]);
      const outcomes = await pending;
      expect(outcomes).toEqual(Array.from({ length: 10 }, (_, i) => [`B(A(x${i}))`]));
      await waitUntil('removed after the waiters read them', async () => (await remaining(s.schema, ids)) === 0);
    });
  });
});
