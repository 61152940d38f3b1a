// Issue 14: WorkflowStore.activity — what the console shows of an execution besides its steps: events (latest value
// per key), messages (in send order, delivered once a recv consumed them), durable waits (fired once checkpointed).
// Run against Postgres and the in-memory store alike.
import { randomUUID } from 'node:crypto';
import { bootForSuite, IMPLEMENTATIONS } from './implementations';

describe.each(IMPLEMENTATIONS)('WorkflowStore.activity contract: $name', (implementation) => {
  const s = bootForSuite(implementation);

  it('is empty for an execution that set, received and waited for nothing', async () => {
    const executionId = randomUUID();
    await s.workflows.insert({ executionId, workflowId: `wf-${executionId}`, workflowName: 'activity', input: null, inputHash: 'h' });
    await expect(s.workflows.activity(executionId)).resolves.toEqual({ events: [], messages: [], waits: [] });
  });

  it('lists events by key, messages in send order with their delivery, and waits with their wake-up and whether they fired', async () => {
    const executionId = randomUUID();
    const workflowId = `wf-${executionId}`;
    const before = Date.now() - 1000;
    await s.workflows.insert({ executionId, workflowId, workflowName: 'activity', input: null, inputHash: 'h' });
    await s.workflows.begin(executionId, 10);
    await s.workflows.setEvent(executionId, 'status', 'charging');
    await s.workflows.setEvent(executionId, 'status', 'shipped');
    await s.workflows.setEvent(executionId, 'carrier', { name: 'DHL' });
    await s.workflows.send(workflowId, 'payment', { n: 1 }, null);
    await s.workflows.send(workflowId, 'payment', { n: 2 }, null);
    await s.workflows.registerWait(executionId, 0, 'sleep', null, 60_000);
    await s.workflows.registerWait(executionId, 1, 'recv', 'h', null);
    await s.workflows.receive(executionId, 1, 'payment', 'h');

    const activity = await s.workflows.activity(executionId);
    expect(activity.events.map((e) => [e.key, e.value])).toEqual([['carrier', { name: 'DHL' }], ['status', 'shipped']]);
    expect(activity.messages.map((m) => [m.topic, m.message, m.status, m.receivedAt])).toEqual([
      ['payment', { n: 1 }, 'delivered', 1],
      ['payment', { n: 2 }, 'pending', null],
    ]);
    expect(activity.messages[0].seq).toBeLessThan(activity.messages[1].seq);
    expect(activity.waits.map((w) => [w.position, w.kind, w.fired])).toEqual([[0, 'sleep', false], [1, 'recv', true]]);
    expect(activity.waits[0].wakeAt!.getTime()).toBeGreaterThan(before + 60_000);
    expect(activity.waits[1].wakeAt).toBeNull();
    for (const d of [...activity.events.map((e) => e.updatedAt), ...activity.messages.map((m) => m.sentAt)]) {
      expect(d).toBeInstanceOf(Date);
      expect(d.getTime()).toBeGreaterThan(before);
    }
  });
});
