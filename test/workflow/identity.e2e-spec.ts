import { INestApplication } from '@nestjs/common';
import {
  MissingWorkflowIdError, Step, Workflow, WorkflowClient, WorkflowConflictError, WorkflowExistsError, WorkflowTimeoutError,
} from '../../lib';
import { waitUntil } from '../support/resilience';
import { sql } from '../support/test-app';
import { failing, GatedWorkflow, gateOf } from './fixtures/gated.workflow';
import { bootWorkflowApp, scenario } from './support';

jest.setTimeout(60_000); // real processes and servers; waits are bounded by the assertions' own timeouts

@Workflow({ name: 'echo-strict' })
class StrictEcho {
  async run(input: unknown): Promise<unknown> {
    return this.echo(input);
  }

  @Step()
  echo(value: unknown): Promise<unknown> {
    return Promise.resolve(value);
  }
}

@Workflow({ name: 'echo-caller', identity: 'caller_provided' })
class CallerEcho {
  async run(input: { n: number }): Promise<number> {
    return this.echo(input.n);
  }

  @Step()
  echo(n: number): Promise<number> {
    return Promise.resolve(n);
  }
}

@Workflow({ name: 'echo-unique', identity: 'always_unique' })
class UniqueEcho {
  async run(input: { n: number }): Promise<number> {
    return this.echo(input.n);
  }

  @Step()
  echo(n: number): Promise<number> {
    return Promise.resolve(n);
  }
}

@Workflow({ name: 'slow-timeout', timeout: 300 })
class TimeoutWorkflow {
  async run(input: { ms: number }): Promise<string> {
    await this.nap(input.ms);
    return 'done';
  }

  @Step()
  async nap(ms: number): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, ms));
  }
}

// SEMANTICS §2 lines 19–21.
describe('workflow identity and starts', () => {
  const s = scenario();
  let app: INestApplication;
  let client: WorkflowClient;

  beforeAll(async () => {
    ({ app, client } = await bootWorkflowApp(s, [StrictEcho, CallerEcho, UniqueEcho, GatedWorkflow, TimeoutWorkflow]));
  });
  afterAll(async () => {
    for (const gate of ['held-pending', 'held-failed', 'held-cancel', 'held-err']) gateOf(gate).open();
    await app.close();
  });

  const executions = (workflowId: string) =>
    sql<{ id: string; status: string }>(`SELECT id, status FROM "${s.schema}".workflow_executions WHERE workflow_id = $1 ORDER BY created_at`, [workflowId]);
  const runs = async (workflowId: string, step: string) =>
    (await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "${s.schema}".step_runs WHERE workflow_id = $1 AND step = $2 AND phase = 'done'`, [workflowId, step]))[0].n;

  describe('19: identity strategies', () => {
    it('strict (default): the id is a hash of workflow name + canonical input; key order does not matter', async () => {
      const a = await client.start(StrictEcho, { b: 2, a: [1, { y: 1, x: 2 }] });
      const b = await client.start(StrictEcho, { a: [1, { x: 2, y: 1 }], b: 2 });
      expect(b.workflowId).toBe(a.workflowId);
      expect(b.executionId).toBe(a.executionId);
      expect(a.workflowId).toMatch(/^echo-strict:/);
      const other = await client.start(StrictEcho, { a: [{ x: 2, y: 1 }, 1], b: 2 }); // array order is significant
      expect(other.workflowId).not.toBe(a.workflowId);
      expect(await a.result({ timeout: '20s' })).toEqual({ a: [1, { x: 2, y: 1 }], b: 2 });
    });

    it('caller_provided: a start without workflowId is refused with MissingWorkflowIdError, and nothing is stored', async () => {
      const before = await sql(`SELECT 1 FROM "${s.schema}".workflow_executions WHERE workflow_name = 'echo-caller'`);
      await expect(client.start(CallerEcho, { n: 1 })).rejects.toBeInstanceOf(MissingWorkflowIdError);
      expect(await sql(`SELECT 1 FROM "${s.schema}".workflow_executions WHERE workflow_name = 'echo-caller'`)).toEqual(before);
      const handle = await client.start(CallerEcho, { n: 1 }, { workflowId: 'caller-1' });
      expect(handle.workflowId).toBe('caller-1');
      expect(await handle.result({ timeout: '20s' })).toBe(1);
    });

    it('always_unique: every start is a new execution with a UUIDv7 workflow id', async () => {
      const a = await client.start(UniqueEcho, { n: 7 });
      const b = await client.start(UniqueEcho, { n: 7 });
      expect(a.workflowId).not.toBe(b.workflowId);
      for (const h of [a, b]) expect(h.workflowId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(await a.result({ timeout: '20s' })).toBe(7);
      expect(await b.result({ timeout: '20s' })).toBe(7);
    });

    it('an explicit workflowId always wins over the strategy', async () => {
      const a = await client.start(UniqueEcho, { n: 8 }, { workflowId: 'explicit-1' });
      const b = await client.start(UniqueEcho, { n: 8 }, { workflowId: 'explicit-1' });
      expect(a.workflowId).toBe('explicit-1');
      expect(b.executionId).toBe(a.executionId);
      const c = await client.start(StrictEcho, { z: 1 }, { workflowId: 'explicit-2' });
      expect(c.workflowId).toBe('explicit-2');
    });
  });

  describe('20: start with an id that already has an execution', () => {
    it('pending or running → no new execution, the existing handle', async () => {
      const id = 'held-pending';
      const first = await client.start(GatedWorkflow, { value: 1 }, { workflowId: id });
      await waitUntil('held started', async () => (await sql(`SELECT 1 FROM "${s.schema}".step_runs WHERE workflow_id = $1 AND step = 'held'`, [id])).length > 0);
      expect(await first.status()).toBe('running');
      const again = await client.start(GatedWorkflow, { value: 1 }, { workflowId: id });
      expect(again.executionId).toBe(first.executionId);
      expect(await executions(id)).toHaveLength(1);
      gateOf(id).open();
      expect(await again.result({ timeout: '20s' })).toEqual({ first: 2, held: 20, last: 25 });
    });

    it('completed → no re-run; the handle returns the stored result', async () => {
      const id = 'held-pending';
      const before = await runs(id, 'first');
      const again = await client.start(GatedWorkflow, { value: 1 }, { workflowId: id });
      expect(await again.status()).toBe('completed');
      expect(await again.result()).toEqual({ first: 2, held: 20, last: 25 });
      expect(await runs(id, 'first')).toBe(before);
      expect(await executions(id)).toHaveLength(1);
    });

    it('failed → a new execution', async () => {
      const id = 'held-failed';
      failing.add(id);
      gateOf(id).open();
      const first = await client.start(GatedWorkflow, { value: 2 }, { workflowId: id });
      await expect(first.result({ timeout: '20s' })).rejects.toThrow(/held failed/);
      expect(await first.status()).toBe('failed');
      failing.delete(id);
      const second = await client.start(GatedWorkflow, { value: 2 }, { workflowId: id });
      expect(second.executionId).not.toBe(first.executionId);
      expect(await second.result({ timeout: '20s' })).toEqual({ first: 3, held: 30, last: 35 });
      expect((await executions(id)).map((e) => e.status)).toEqual(['failed', 'completed']);
    });

    it('cancelled → a new execution', async () => {
      const id = 'held-cancel';
      const first = await client.start(GatedWorkflow, { value: 3 }, { workflowId: id });
      await waitUntil('held started', async () => (await sql(`SELECT 1 FROM "${s.schema}".step_runs WHERE workflow_id = $1 AND step = 'held'`, [id])).length > 0);
      expect(await client.cancel(id)).toBe(true);
      gateOf(id).open();
      const second = await client.start(GatedWorkflow, { value: 3 }, { workflowId: id });
      expect(second.executionId).not.toBe(first.executionId);
      expect(await second.result({ timeout: '20s' })).toEqual({ first: 4, held: 40, last: 45 });
      expect((await executions(id)).map((e) => e.status)).toEqual(['cancelled', 'completed']);
    });

    it('timed_out → a new execution', async () => {
      const id = 'timeout-1';
      const first = await client.start(TimeoutWorkflow, { ms: 2000 }, { workflowId: id });
      await expect(first.result({ timeout: '20s' })).rejects.toBeInstanceOf(WorkflowTimeoutError);
      expect(await first.status()).toBe('timed_out');
      const second = await client.start(TimeoutWorkflow, { ms: 2000 }, { workflowId: id });
      expect(second.executionId).not.toBe(first.executionId);
      expect((await executions(id)).map((e) => e.status)).toEqual(['timed_out', expect.stringMatching(/pending|running|timed_out/)]);
    });

    it("onConflict: 'error' → WorkflowExistsError naming the existing execution and its status", async () => {
      const id = 'held-err';
      const first = await client.start(GatedWorkflow, { value: 4 }, { workflowId: id });
      const err = await client.start(GatedWorkflow, { value: 4 }, { workflowId: id, onConflict: 'error' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(WorkflowExistsError);
      expect(err).toMatchObject({ executionId: first.executionId, status: expect.stringMatching(/pending|running/) });
      expect((err as Error).message).toContain(first.executionId);
      gateOf(id).open();
      await first.result({ timeout: '20s' });
      await expect(client.start(GatedWorkflow, { value: 4 }, { workflowId: id, onConflict: 'error' })).rejects.toMatchObject({
        executionId: first.executionId,
        status: 'completed',
      });
    });
  });

  it('21: same id, different input → WorkflowConflictError; nothing starts', async () => {
    const first = await client.start(StrictEcho, { v: 1 }, { workflowId: 'conflict-1' });
    await first.result({ timeout: '20s' });
    const err = await client.start(StrictEcho, { v: 2 }, { workflowId: 'conflict-1' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkflowConflictError);
    expect(err).toMatchObject({ workflowId: 'conflict-1', executionId: first.executionId });
    // Another workflow with the same id is a conflict too.
    await expect(client.start(UniqueEcho, { n: 1 }, { workflowId: 'conflict-1' })).rejects.toBeInstanceOf(WorkflowConflictError);
    expect(await executions('conflict-1')).toEqual([{ id: first.executionId, status: 'completed' }]);
  });
});
