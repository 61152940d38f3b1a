import { Test } from '@nestjs/testing';
import { randomUUID } from 'node:crypto';
import { IdempotencyModule, IdempotencyModuleOptions, IdempotencySchemaError, Step, Workflow, WorkflowDefinitionError } from '../../lib';
import { databaseUrlNamed, sql, uniqueSchema } from '../support/test-app';

/** The Postgres connections open under `applicationName`, from the server's own view. */
async function openConnections(applicationName: string): Promise<number> {
  return Number((await sql<{ n: string }>('SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1', [applicationName]))[0].n);
}

/**
 * Starts a module with `options` (and `providers`) whose init must fail with `refusal`, and returns the most
 * connections ever open under its own application_name in the 2 s after: before, the connections went on opening
 * (or stayed open) after init() had failed, within a few hundred milliseconds, until the pool's idle timeout.
 */
async function connectionsLeftBy(options: Pick<IdempotencyModuleOptions, 'migrationsRun'>, providers: unknown[], refusal: new (...args: never[]) => Error): Promise<number> {
  const applicationName = `failed-startup-${randomUUID().slice(0, 8)}`;
  const moduleRef = await Test.createTestingModule({
    imports: [IdempotencyModule.forRoot({ postgres: { url: databaseUrlNamed(applicationName), schema: uniqueSchema() }, redis: false, ...options })],
    providers: providers as never[],
  }).compile();
  moduleRef.useLogger(false);
  await expect(moduleRef.init()).rejects.toThrow(refusal);
  const deadline = Date.now() + 2_000;
  let seen = 0;
  while (Date.now() < deadline) {
    seen = Math.max(seen, await openConnections(applicationName));
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return seen;
}

describe('a startup that fails', () => {
  it('in another provider of the module opens no Postgres connection: nothing is left behind for a process or a test to close', async () => {
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
    expect(await connectionsLeftBy({ migrationsRun: true }, [RefusedWorkflow], WorkflowDefinitionError)).toBe(0);
  });

  it('on a schema that is not migrated closes the connection it had opened to check it', async () => {
    expect(await connectionsLeftBy({ migrationsRun: false }, [], IdempotencySchemaError)).toBe(0);
  });
});
