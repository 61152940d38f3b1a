import { INestApplication } from '@nestjs/common';
import Redis from 'ioredis';
import { currentStep, Step, Workflow, WorkflowClient } from '../../lib';
import { waitUntil } from '../support/resilience';
import { ownRedis } from '../support/own-redis';
import { sql } from '../support/test-app';
import { RunLog } from './fixtures/run-log';
import { bootWorkflowApp, scenario } from './support';

jest.setTimeout(60_000); // real processes and servers; waits are bounded by the assertions' own timeouts

/** Holds the first run of an execution between its two steps until the test opens it; later runs pass. */
const between = { calls: 0, opened: Promise.resolve(), firstRunSettledB: false };

@Workflow({ name: 'two-steps-held' })
class TwoStepsHeld {
  constructor(private readonly log: RunLog) {}

  async run(): Promise<string[]> {
    const first = await this.work('a');
    const isFirstRun = ++between.calls === 1;
    if (isFirstRun) await between.opened;
    try {
      return [first, await this.work('b')];
    } finally {
      // Its call of step b came back (the checkpointed result, or the news that another run ended the execution).
      if (isFirstRun) between.firstRunSettledB = true;
    }
  }

  @Step()
  async work(name: string): Promise<string> {
    await this.log.record(currentStep().workflowId, name);
    return name;
  }
}

// On a dedicated Redis (FLUSHALL must not touch anyone else's data).
describe('a run that has not heard of a recovery run of its execution (Redis flushed under it)', () => {
  const name = `wf-fresh-${process.pid}`;
  let app: INestApplication;
  const redis = ownRedis(name, () => app?.close());

  it('never runs a step again that the recovery run completed: its step job reads Postgres, its run\'s lock being gone', async () => {
    const s = scenario({ redisUrl: redis.url });
    let client: WorkflowClient;
    ({ app, client } = await bootWorkflowApp(s, [TwoStepsHeld], { concurrency: 4 }));
    let release!: () => void;
    between.opened = new Promise<void>((resolve) => (release = resolve));
    const handle = await client.start(TwoStepsHeld, {}, { workflowId: 'held-1' });
    const runs = async (step: string) =>
      (await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "${s.schema}".step_runs WHERE workflow_id = 'held-1' AND step = $1`, [step]))[0].n;
    await waitUntil('the first run is held between its steps', () => between.calls === 1);
    // The first run's workflow job and its lock are gone; the reconciler starts a recovery run, which completes.
    const probe = new Redis(redis.url);
    await probe.flushall();
    probe.disconnect();
    await waitUntil('the recovery run completed step b', async () => (await runs('b')) === 1);
    expect(await handle.result({ timeout: '20s' })).toEqual(['a', 'b']);
    // The first run goes on, not knowing: its step job for b is added again (the recovery run's was removed).
    release();
    await waitUntil('the first run\'s call of step b came back', () => between.firstRunSettledB);
    await new Promise((resolve) => setTimeout(resolve, 300)); // a second run of b would be recorded by now
    expect(await runs('a')).toBe(1);
    expect(await runs('b')).toBe(1);
  });
});
