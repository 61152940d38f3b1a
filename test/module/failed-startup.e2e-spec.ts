import { Test } from '@nestjs/testing';
import { randomUUID } from 'node:crypto';
import { IdempotencyModule, Step, Workflow, WorkflowDefinitionError } from '../../lib';
import { databaseUrl, sql, uniqueSchema } from '../support/test-app';

/** The Postgres connections open under `applicationName`, from the server's own view. */
async function openConnections(applicationName: string): Promise<number> {
  return Number((await sql<{ n: string }>('SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1', [applicationName]))[0].n);
}

describe('a startup that fails in another provider of the module', () => {
  it('opens no Postgres connection: nothing is left behind for a process or a test to close', async () => {
    // Two steps under one name: the workflow explorer refuses them in its onModuleInit, a provider of the same module.
    @Workflow({ name: 'refused-at-startup' })
    class RefusedWorkflow {
      async run(): Promise<void> {
        await this.first();
      }

      @Step({ name: 'same' })
      async first(): Promise<void> {}

      @Step({ name: 'same' })
      async second(): Promise<void> {}
    }
    const applicationName = `failed-startup-${randomUUID().slice(0, 8)}`;
    const url = new URL(databaseUrl());
    url.searchParams.set('application_name', applicationName);
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ postgres: { url: url.toString(), schema: uniqueSchema() }, redis: false, migrationsRun: true })],
      providers: [RefusedWorkflow],
    }).compile();
    moduleRef.useLogger(false);
    await expect(moduleRef.init()).rejects.toThrow(WorkflowDefinitionError);
    // Before, the connections went on opening after init() had failed: a pooled connection (and the migrations')
    // appeared here within a few hundred milliseconds and stayed until the pool's idle timeout.
    const deadline = Date.now() + 2_000;
    let seen = 0;
    while (Date.now() < deadline) {
      seen = Math.max(seen, await openConnections(applicationName));
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(seen).toBe(0);
  });
});
