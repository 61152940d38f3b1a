import { INestApplication } from '@nestjs/common';
import { join } from 'node:path';
import { TaskClient } from '../../lib';
import { sql } from '../support/test-app';
import { Child, kill, spawnWorker } from '../workflow/processes';
import { bootWorkflowApp, scenario } from '../workflow/support';
import { CrashTasks } from './fixtures/crash.tasks';

const WORKER = join(__dirname, 'fixtures', 'task-worker-process.ts');

describe('a task worker killed with SIGKILL mid-task', () => {
  const s = scenario();
  let app: INestApplication;
  const children: Child[] = [];

  beforeAll(async () => {
    // A client-only instance: the task runs in the worker processes.
    ({ app } = await bootWorkflowApp(s, [CrashTasks], { workers: false }));
  }, 60_000);
  afterAll(async () => {
    await Promise.all(children.map((c) => kill(c)));
    await app.close();
  });

  it('the task is taken over by another worker and completes once; a duplicate enqueue meanwhile returns the same execution', async () => {
    const tasks = app.get(TaskClient);
    const hanging = spawnWorker(s, { TASK_HANG: '1' }, WORKER);
    children.push(hanging);
    await hanging.line('READY');
    const handle = await tasks.enqueue(CrashTasks, 'charge', ['o-1'], { taskId: 'charge-o-1' });
    await hanging.line('STARTED');
    expect(await handle.status()).toBe('running');
    await kill(hanging);

    const again = await tasks.enqueue(CrashTasks, 'charge', ['o-1'], { taskId: 'charge-o-1' });
    expect(again.executionId).toBe(handle.executionId);
    const healthy = spawnWorker(s, {}, WORKER);
    children.push(healthy);
    expect(await handle.result({ timeout: 60_000 })).toBe('charged o-1');
    const runs = await sql<{ phase: string; pid: number }>(`SELECT phase, pid FROM "${s.schema}".step_runs WHERE workflow_id = 'o-1' ORDER BY id`);
    // At-least-once across the crash: the interrupted run started, the takeover ran to the end, once.
    expect(runs.map((r) => r.phase)).toEqual(['start', 'start', 'done']);
    expect(runs[0].pid).toBe(hanging.proc.pid);
    expect(runs[2].pid).toBe(healthy.proc.pid);
    expect(await sql(`SELECT 1 FROM "${s.schema}".workflow_executions WHERE workflow_id = 'charge-o-1'`)).toHaveLength(1);
  }, 120_000);
});
