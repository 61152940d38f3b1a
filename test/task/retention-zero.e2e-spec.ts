// Issue 12 (retention) with the workflow rule for retention "0": a task kept for no time is deleted as soon as its
// waiting result() has read the outcome, and its task id can be enqueued again at once.
import { INestApplication, Injectable } from '@nestjs/common';
import { Task, TaskClient, TaskNotFoundError } from '../../lib';
import { sql } from '../support/test-app';
import { bootWorkflowApp, scenario } from '../workflow/support';

const runs = new Map<string, number>();

@Injectable()
class OneShotTasks {
  @Task({ name: 'one-shot', retention: '0' })
  send(id: string): Promise<string> {
    runs.set(id, (runs.get(id) ?? 0) + 1);
    return Promise.resolve(`sent ${id}`);
  }
}

describe('tasks with retention "0"', () => {
  const s = scenario();
  let app: INestApplication;
  let tasks: TaskClient;

  beforeAll(async () => {
    ({ app } = await bootWorkflowApp(s, [OneShotTasks], {}, { retention: { cleanupInterval: false } }));
    tasks = app.get(TaskClient);
  }, 60_000);
  afterAll(() => app.close());

  const rows = async (taskId: string) => (await sql(`SELECT 1 FROM "${s.schema}".workflow_executions WHERE workflow_id = $1`, [taskId])).length;

  it('are deleted once their waiting result() has the outcome, and the id runs again when enqueued again', async () => {
    const first = await tasks.enqueue(OneShotTasks, 'send', ['a'], { taskId: 'once-a' });
    await expect(first.result({ timeout: 20_000 })).resolves.toBe('sent a');
    expect(await rows('once-a')).toBe(0);
    await expect(tasks.getTask('once-a')).rejects.toBeInstanceOf(TaskNotFoundError);

    const again = await tasks.enqueue(OneShotTasks, 'send', ['a'], { taskId: 'once-a' });
    expect(again.executionId).not.toBe(first.executionId);
    await expect(again.result({ timeout: 20_000 })).resolves.toBe('sent a');
    expect(runs.get('a')).toBe(2);
  });
});
