import { INestApplication } from '@nestjs/common';
import { Queue, QueueEvents } from 'bullmq';
import { randomUUID } from 'node:crypto';
import { currentStep, DeterminismError, Step, StepFailedError, Workflow, WorkflowClient, WorkflowFailedError } from '../../lib';
import { waitUntil } from '../support/resilience';
import { sql } from '../support/test-app';
import { gateOf } from './fixtures/gated.workflow';
import { RunLog } from './fixtures/run-log';
import { bootWorkflowApp, scenario } from './support';

jest.setTimeout(60_000); // real processes and servers; waits are bounded by the assertions' own timeouts

/** The schema of the suite's scenario (the shapes workflow's slow step reads its siblings' checkpoints there). */
let stepsSchema = '';

const attemptsSeen = new Map<string, { attempt: number; key: string }[]>();

@Workflow({ name: 'shapes' })
class ShapesWorkflow {
  constructor(private readonly log: RunLog) {}

  async run(input: { slow: string }): Promise<unknown> {
    // Promise.all: positions follow call order (0, 1, 2), not completion order. The slow one finishes last: it
    // waits until the other two are checkpointed.
    const values = ['x', 'y', 'z'];
    const parallel = await Promise.all(values.map((v) => this.echo(v, v === input.slow ? values.filter((o) => o !== v) : [])));
    const looped: string[] = [];
    for (let i = 0; i < 3; i++) looped.push(await this.echo(`loop-${i}`, []));
    return { parallel, looped };
  }

  /** Returns `value` once the echo steps that returned `after` are checkpointed. */
  @Step()
  async echo(value: string, after: string[]): Promise<string> {
    const { executionId, workflowId } = currentStep();
    if (after.length > 0) {
      await waitUntil(`${after.join(', ')} checkpointed`, async () => {
        const [{ n }] = await sql<{ n: number }>(
          `SELECT count(*)::int AS n FROM "${stepsSchema}".workflow_steps
            WHERE execution_id = $1 AND name = 'echo' AND status = 'completed' AND result #>> '{}' = ANY($2::text[])`,
          [executionId, after],
        );
        return n === after.length;
      });
    }
    await this.log.record(workflowId, `echo-${value}`);
    return value;
  }
}

@Workflow({ name: 'retrying' })
class RetryingWorkflow {
  async run(input: { failTimes: number; attempts: number }): Promise<string> {
    return input.attempts === 3 ? this.flaky3(input.failTimes) : this.flaky1(input.failTimes);
  }

  @Step({ attempts: 3, backoff: { type: 'fixed', delay: 100 } })
  flaky3(failTimes: number): Promise<string> {
    return Promise.resolve().then(() => this.flaky(failTimes));
  }

  @Step()
  flaky1(failTimes: number): Promise<string> {
    return Promise.resolve().then(() => this.flaky(failTimes));
  }

  private flaky(failTimes: number): string {
    const { workflowId, attempt, idempotencyKey } = currentStep();
    const seen = attemptsSeen.get(workflowId) ?? [];
    seen.push({ attempt, key: idempotencyKey });
    attemptsSeen.set(workflowId, seen);
    if (seen.length <= failTimes) throw new TypeError(`boom ${seen.length}`);
    return `ok after ${seen.length}`;
  }
}

const lateResults: string[] = [];

@Workflow({ name: 'timing-out-step' })
class StepTimeoutWorkflow {
  async run(input: { id: string }): Promise<string> {
    return this.slowFirst(input.id);
  }

  @Step({ attempts: 2, timeout: 200 })
  async slowFirst(id: string): Promise<string> {
    const { attempt } = currentStep();
    if (attempt === 1) {
      await new Promise((resolve) => setTimeout(resolve, 800));
      lateResults.push(id);
      return 'late result of attempt 1';
    }
    return 'attempt 2';
  }
}

const caughtRuns: string[] = [];

@Workflow({ name: 'catches' })
class CatchingWorkflow {
  constructor(private readonly log: RunLog) {}

  async run(input: { id: string }): Promise<string> {
    caughtRuns.push(input.id);
    let caught = 'none';
    try {
      await this.alwaysFails(input.id);
    } catch (err) {
      caught = `${(err as Error).name}: ${(err as StepFailedError).error.message}`;
    }
    await this.nap(input.id);
    return caught;
  }

  @Step()
  async alwaysFails(id: string): Promise<void> {
    await this.log.record(id, 'alwaysFails');
    throw new RangeError(`failure ${randomUUID()}`);
  }

  @Step()
  async nap(id: string): Promise<void> {
    await this.log.record(id, 'nap', 'start');
    await gateOf(id).promise;
  }
}

@Workflow({ name: 'evolving' })
class EvolvingV1 {
  async run(input: { id: string }): Promise<string> {
    await this.a(input.id);
    return this.wait(input.id);
  }

  @Step()
  a(id: string): Promise<string> {
    return Promise.resolve(`a-${id}`);
  }

  @Step()
  async wait(id: string): Promise<string> {
    await gateOf(id).promise;
    return 'v1';
  }
}

@Workflow({ name: 'evolving' })
class EvolvingV2 {
  async run(input: { id: string }): Promise<string> {
    return this.b(input.id); // position 0 is now "b": the code changed under a running execution
  }

  @Step()
  b(id: string): Promise<string> {
    return Promise.resolve(`b-${id}`);
  }
}

// SEMANTICS §2 lines 23–26.
describe('steps', () => {
  const s = scenario();
  stepsSchema = s.schema;
  let app: INestApplication;
  let client: WorkflowClient;

  beforeAll(async () => {
    ({ app, client } = await bootWorkflowApp(s, [ShapesWorkflow, RetryingWorkflow, StepTimeoutWorkflow, CatchingWorkflow, EvolvingV1]));
  });
  afterAll(async () => {
    await app.close();
  });

  const runCount = async (workflowId: string, step: string, phase = 'done') =>
    (await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "${s.schema}".step_runs WHERE workflow_id = $1 AND step = $2 AND phase = $3`, [workflowId, step, phase]))[0].n;

  it('23: each step is a BullMQ job whose id is derived from execution id and position; outcomes are checkpointed', async () => {
    const events = new QueueEvents('steps', { connection: { url: s.redisUrl }, prefix: s.prefix });
    await events.waitUntilReady();
    const added: string[] = [];
    events.on('added', ({ jobId }) => added.push(jobId));
    try {
      const handle = await client.start(ShapesWorkflow, { slow: 'x' }, { workflowId: 'shapes-ids' });
      await handle.result({ timeout: '20s' });
      await waitUntil('added events', () => added.length >= 6);
      expect(added.sort()).toEqual([0, 1, 2, 3, 4, 5].map((p) => `${handle.executionId}-${p}`).sort());
      const checkpoints = await client.steps(handle.executionId);
      expect(checkpoints.map((c) => [c.position, c.name, c.status])).toEqual([0, 1, 2, 3, 4, 5].map((p) => [p, 'echo', 'completed']));
    } finally {
      await events.close();
    }
  });

  it('23: Postgres, not the job id, decides: a job re-added for a checkpointed step does not run it again', async () => {
    const handle = await client.start(ShapesWorkflow, { slow: 'y' }, { workflowId: 'shapes-readd' });
    await handle.result({ timeout: '20s' });
    const queue = new Queue('steps', { connection: { url: s.redisUrl }, prefix: s.prefix });
    try {
      const data = { executionId: handle.executionId, workflowId: handle.workflowId, workflowName: 'shapes', owner: 'shapes', step: 'echo', position: 0, args: ['x', []] };
      // Listen before adding: the worker may finish the job before a later listener would hear of it.
      const events = new QueueEvents('steps', { connection: { url: s.redisUrl }, prefix: s.prefix });
      await events.waitUntilReady();
      const job = await queue.add('echo', data, { jobId: `${handle.executionId}-0` });
      const value = (await job.waitUntilFinished(events, 20_000)) as unknown;
      await events.close();
      // The job returns a marker (job events outlive retention); the checkpoint in Postgres is the original one.
      expect(value).toEqual({ kind: 'checkpointed', position: 0 });
      expect((await client.steps(handle.executionId))[0]).toMatchObject({ position: 0, result: 'x' });
      expect(await runCount('shapes-readd', 'echo-x')).toBe(1);
    } finally {
      await queue.close();
    }
  });

  it('24: steps in Promise.all and in loops get stable positions (call order, not completion order)', async () => {
    const handle = await client.start(ShapesWorkflow, { slow: 'x' }, { workflowId: 'shapes-positions' });
    expect(await handle.result({ timeout: '20s' })).toEqual({ parallel: ['x', 'y', 'z'], looped: ['loop-0', 'loop-1', 'loop-2'] });
    const checkpoints = await client.steps(handle.executionId);
    expect(checkpoints.map((c) => c.result)).toEqual(['x', 'y', 'z', 'loop-0', 'loop-1', 'loop-2']);
    // x was the slowest: it finished last but keeps position 0.
    expect(checkpoints[0].completedAt.getTime()).toBeGreaterThanOrEqual(checkpoints[1].completedAt.getTime());
    expect(checkpoints[0].completedAt.getTime()).toBeGreaterThanOrEqual(checkpoints[2].completedAt.getTime());
  });

  it('24: replay from the top returns stored results and throws a stored final error again without running the step', async () => {
    const id = `catches-${randomUUID().slice(0, 6)}`;
    const handle = await client.start(CatchingWorkflow, { id }, { workflowId: id });
    await waitUntil('nap started', async () => (await runCount(id, 'nap', 'start')) === 1);
    const firstCaught = (await client.steps(handle.executionId))[0];
    expect(firstCaught).toMatchObject({ position: 0, name: 'alwaysFails', status: 'failed' });
    // Restart the app: the run is handed back and replayed from the top by the next instance.
    await app.close();
    ({ app, client } = await bootWorkflowApp(s, [ShapesWorkflow, RetryingWorkflow, StepTimeoutWorkflow, CatchingWorkflow, EvolvingV1]));
    await waitUntil('replayed', () => caughtRuns.filter((r) => r === id).length >= 2);
    gateOf(id).open();
    const caught = await (await client.getHandle<string>(id)).result({ timeout: '20s' });
    expect(caught).toBe(`StepFailedError: ${firstCaught.error!.message}`);
    expect(await runCount(id, 'alwaysFails')).toBe(1); // thrown again from the checkpoint, not retried
  });

  it('24: a step whose stored name differs at that position → DeterminismError, never the stored value', async () => {
    const id = `evolve-${randomUUID().slice(0, 6)}`;
    const handle = await client.start(EvolvingV1, { id }, { workflowId: id });
    await waitUntil('a checkpointed', async () => (await client.steps(handle.executionId)).length === 1);
    await app.close();
    // The new code calls "b" at position 0, where "a" is recorded.
    ({ app, client } = await bootWorkflowApp(s, [EvolvingV2]));
    const err = await (await client.getHandle(id)).result({ timeout: '20s' }).catch((e: unknown) => e);
    gateOf(id).open();
    expect(err).toBeInstanceOf(WorkflowFailedError);
    expect((err as WorkflowFailedError).error.name).toBe(DeterminismError.name);
    expect((err as WorkflowFailedError).error.message).toMatch(/recorded as "a" but the code now calls "b"/);
    await app.close();
    ({ app, client } = await bootWorkflowApp(s, [ShapesWorkflow, RetryingWorkflow, StepTimeoutWorkflow, CatchingWorkflow, EvolvingV1]));
  });

  it('25: retries with backoff; the idempotency key is the same on every attempt', async () => {
    const handle = await client.start(RetryingWorkflow, { failTimes: 2, attempts: 3 }, { workflowId: 'retry-ok' });
    expect(await handle.result({ timeout: '20s' })).toBe('ok after 3');
    const seen = attemptsSeen.get('retry-ok')!;
    expect(seen.map((a) => a.attempt)).toEqual([1, 2, 3]);
    expect(new Set(seen.map((a) => a.key)).size).toBe(1);
    expect(seen[0].key).toBe(`${handle.executionId}:0`);
    const [checkpoint] = await client.steps(handle.executionId);
    expect(checkpoint).toMatchObject({ status: 'completed', attempts: 3, result: 'ok after 3' });
  });

  it('25: after the last attempt the failure is checkpointed and the workflow fails with StepFailedError', async () => {
    const handle = await client.start(RetryingWorkflow, { failTimes: 5, attempts: 3 }, { workflowId: 'retry-exhausted' });
    const err = (await handle.result({ timeout: '20s' }).catch((e: unknown) => e)) as WorkflowFailedError;
    expect(err).toBeInstanceOf(WorkflowFailedError);
    expect(err.error).toMatchObject({ name: 'StepFailedError', message: expect.stringMatching(/flaky3.*3 attempt\(s\).*TypeError: boom 3/) });
    expect(attemptsSeen.get('retry-exhausted')).toHaveLength(3);
    expect(await client.steps(handle.executionId)).toEqual([
      expect.objectContaining({ status: 'failed', attempts: 3, error: expect.objectContaining({ name: 'TypeError', message: 'boom 3' }) }),
    ]);
  });

  it('25: a timed-out attempt is abandoned and counted as failed; its late result is never written', async () => {
    const handle = await client.start(StepTimeoutWorkflow, { id: 'late-1' }, { workflowId: 'late-1' });
    expect(await handle.result({ timeout: '20s' })).toBe('attempt 2');
    await waitUntil('the abandoned attempt finished', () => lateResults.includes('late-1'));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await client.steps(handle.executionId)).toEqual([expect.objectContaining({ status: 'completed', attempts: 2, result: 'attempt 2' })]);
  });

  it('26: two workers finishing the same step → one checkpoint; the loser adopts the winner; the workflow advances once', async () => {
    const id = `dup-${randomUUID().slice(0, 6)}`;
    const handle = await client.start(CatchingWorkflow, { id }, { workflowId: id });
    await waitUntil('nap started', async () => (await runCount(id, 'nap', 'start')) === 1);
    // A second job for the same (execution, position) — as a second worker would run it — while the first is running.
    const queue = new Queue('steps', { connection: { url: s.redisUrl }, prefix: s.prefix });
    const events = new QueueEvents('steps', { connection: { url: s.redisUrl }, prefix: s.prefix });
    await events.waitUntilReady();
    try {
      const data = { executionId: handle.executionId, workflowId: id, workflowName: 'catches', owner: 'catches', step: 'nap', position: 1, args: [id] };
      const twin = await queue.add('nap', data, { jobId: `twin-${id}` });
      await waitUntil('both running', async () => (await runCount(id, 'nap', 'start')) === 2);
      gateOf(id).open();
      const twinResult = (await twin.waitUntilFinished(events, 20_000)) as unknown;
      expect(twinResult).toEqual({ kind: 'checkpointed', position: 1 });
      await handle.result({ timeout: '20s' });
      const rows = await sql(`SELECT position FROM "${s.schema}".workflow_steps WHERE execution_id = $1 ORDER BY position`, [handle.executionId]);
      expect(rows).toEqual([{ position: 0 }, { position: 1 }]);
      expect(caughtRuns.filter((r) => r === id)).toHaveLength(1);
    } finally {
      await events.close();
      await queue.close();
    }
  });
});
