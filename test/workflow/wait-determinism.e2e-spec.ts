import { INestApplication } from '@nestjs/common';
import { recv, setEvent, sleep, Step, Workflow, WorkflowClient, WorkflowFailedError } from '../../lib';
import { makeSleepDue } from '../support/make-sleep-due';
import { waitUntil } from '../support/resilience';
import { sql } from '../support/test-app';
import { bootWorkflowApp, scenario } from './support';

jest.setTimeout(60_000);

/** The code after deploy: what it calls at position 1 changes while an execution sleeps there. */
const deployed = { version: 1 };

@Workflow({ name: 'changing-waits' })
class ChangingWaitsWorkflow {
  async run(): Promise<string> {
    await setEvent('phase', 'started');
    if (deployed.version === 1) await sleep('1h'); // the test makes it due once the new code is in place
    else if (deployed.version === 2) await recv('late');
    else await this.instead();
    return 'done';
  }

  @Step()
  instead(): Promise<void> {
    return Promise.resolve();
  }
}

// Issue 11: sleep, recv, setEvent take positions in the same sequence as steps; another order on replay is a DeterminismError.
describe('durable calls and determinism', () => {
  const s = scenario();
  let app: INestApplication;
  let client: WorkflowClient;

  beforeAll(async () => {
    ({ app, client } = await bootWorkflowApp(s, [ChangingWaitsWorkflow]));
  });
  afterAll(async () => {
    await app.close();
  });

  it.each([
    [2, '@recv'],
    [3, 'instead'],
  ])('a replay that calls something else where sleep() waits (version %i calls %s) fails with DeterminismError naming both', async (version, called) => {
    deployed.version = 1;
    const handle = await client.start(ChangingWaitsWorkflow, {}, { workflowId: `changing-${version}` });
    await waitUntil('the execution sleeps', async () =>
      (await sql(`SELECT 1 FROM "${s.schema}".workflow_executions WHERE workflow_id = $1 AND status = 'pending' AND suspended_until IS NOT NULL`, [`changing-${version}`])).length > 0);
    deployed.version = version; // "deploy" other code while it sleeps
    await makeSleepDue(s.schema, `changing-${version}`); // then its wake-up comes: the replay runs the new code
    const failure = await handle.result({ timeout: '20s' }).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(WorkflowFailedError);
    expect((failure as WorkflowFailedError).error).toMatchObject({ name: 'DeterminismError', code: 'WORKFLOW_NONDETERMINISTIC' });
    expect((failure as WorkflowFailedError).error.message).toContain(`step #1 was recorded as "@sleep" but the code now calls "${called}"`);
  });
});
