import { INestApplication } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Step, Workflow, WorkflowClient, WorkflowFailedError } from '../../lib';
import { WorkflowStore } from '../../lib/workflow/storage/workflow.store';
import { bootWorkflowApp, scenario } from './support';

jest.setTimeout(60_000); // real Postgres and Redis; waits are bounded by the assertions' own timeouts

const failOnce = new Set<string>();

@Workflow({ name: 'three-adds' })
class ThreeAdds {
  async run(input: { n: number; id: string }): Promise<number> {
    let total = input.n;
    for (let i = 1; i <= 3; i++) total = await this.add(total, i, input.id);
    return total;
  }

  @Step()
  add(total: number, i: number, id: string): Promise<number> {
    if (i === 2 && failOnce.delete(id)) return Promise.reject(new Error('down once'));
    return Promise.resolve(total + i);
  }
}

describe('workflows: Postgres statements per step', () => {
  const s = scenario();
  let app: INestApplication;
  let client: WorkflowClient;
  let store: WorkflowStore;

  beforeAll(async () => {
    ({ app, client } = await bootWorkflowApp(s, [ThreeAdds]));
    store = app.get(WorkflowStore);
  });

  afterAll(async () => {
    jest.restoreAllMocks();
    await app?.close();
  });

  it('the first run of an execution checkpoints each step in one statement: no read before the step; result() only reads', async () => {
    const reads = jest.spyOn(store, 'stepState');
    const writes = jest.spyOn(store, 'checkpoint');
    const watches = jest.spyOn(store, 'watch');
    try {
      const handle = await client.start(ThreeAdds, { n: 10, id: 'plain' }, { workflowId: `adds-${randomUUID()}` });
      expect(await handle.result({ timeout: '20s' })).toBe(16);
      const mine = (calls: unknown[][]) => calls.filter((c) => c[0] === handle.executionId).length;
      expect(mine(reads.mock.calls)).toBe(0);
      expect(mine(writes.mock.calls)).toBe(3);
      expect((await client.steps(handle.executionId)).map((c) => c.result)).toEqual([11, 13, 16]);
      // result() registers itself (two writes) only under retention "0"; here it reads.
      expect(mine(watches.mock.calls)).toBe(0);
    } finally {
      reads.mockRestore();
      writes.mockRestore();
      watches.mockRestore();
    }
  });

  it('a later run of the execution (here: resume) reads Postgres before each step it runs, and keeps completed steps', async () => {
    const id = `once-${randomUUID()}`;
    failOnce.add(id);
    const handle = await client.start(ThreeAdds, { n: 0, id }, { workflowId: id });
    await expect(handle.result({ timeout: '20s' })).rejects.toBeInstanceOf(WorkflowFailedError);
    const reads = jest.spyOn(store, 'stepState');
    try {
      const resumed = await client.resume<number>(id);
      expect(await resumed.result({ timeout: '20s' })).toBe(6);
      // Position 0 is answered by its checkpoint; positions 1 (re-run) and 2 read before they run.
      expect(reads.mock.calls.filter((c) => c[0] === handle.executionId).map((c) => c[1])).toEqual([1, 2]);
    } finally {
      reads.mockRestore();
    }
  });
});
