import type { WorkflowExecution, WorkflowStatus } from '../workflow.interfaces';
import { WorkflowStore } from './workflow.store';

/** Only what the default watch/unwatch/removeFinished use; the other abstract methods do not exist at run time. */
const Base = WorkflowStore as unknown as new () => Pick<WorkflowStore, 'watch' | 'unwatch' | 'removeFinished' | 'get' | 'deleteFinished'>;

class SingleProcessStore extends Base {
  readonly rows = new Map<string, WorkflowStatus>();

  override get = (executionId: string): Promise<WorkflowExecution | null> => {
    const status = this.rows.get(executionId);
    return Promise.resolve(status === undefined ? null : ({ executionId, status } as WorkflowExecution));
  };

  override deleteFinished = (executionId: string): Promise<void> => {
    if (this.rows.get(executionId) !== 'running' && this.rows.get(executionId) !== 'pending') this.rows.delete(executionId);
    return Promise.resolve();
  };
}

// The defaults serve stores whose waiters all live in one process (the in-memory store of the testing module).
describe('WorkflowStore default result() waiter bookkeeping', () => {
  it('retention "0" at finish keeps an execution a waiter registered on; the last waiter removes it', async () => {
    const store = new SingleProcessStore();
    store.rows.set('e', 'running');
    expect(await store.watch('e')).toEqual({ execution: expect.objectContaining({ status: 'running' }), watching: true });
    expect((await store.watch('e'))?.watching).toBe(true);
    store.rows.set('e', 'completed');
    await store.removeFinished('e');
    expect(store.rows.has('e')).toBe(true);
    await store.unwatch('e', true);
    expect(store.rows.has('e')).toBe(true);
    await store.unwatch('e', true);
    expect(store.rows.has('e')).toBe(false);
  });

  it('a finished execution is read without registering, and removed at once when nobody waits', async () => {
    const store = new SingleProcessStore();
    store.rows.set('done', 'failed');
    expect((await store.watch('done'))?.watching).toBe(false);
    await store.removeFinished('done');
    expect(store.rows.has('done')).toBe(false);
    expect(await store.watch('done')).toBeNull();
  });
});
