import { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { IdempotencyConfigError, IdempotencyModule, Step, Workflow } from '../../lib';
import { databaseUrl, redisUrl, uniqueSchema } from '../support/test-app';

// Issue 7 item 13: a mistyped option fails at startup instead of booting on defaults nobody chose.
describe('unknown option keys fail at startup', () => {
  async function bootError(imports: unknown[], providers: unknown[] = []): Promise<unknown> {
    let app: INestApplication | undefined;
    try {
      const moduleRef = await Test.createTestingModule({ imports: imports as never[], providers: providers as never[] }).compile();
      app = moduleRef.createNestApplication();
      app.useLogger(false);
      await app.init();
      return undefined;
    } catch (err) {
      return err;
    } finally {
      await app?.close();
    }
  }

  it('forRoot({ workflows: { prefix } }) names the key and suggests queuePrefix', async () => {
    const err = await bootError([
      IdempotencyModule.forRoot({ postgres: { url: databaseUrl(), schema: uniqueSchema('unk') }, redis: { url: redisUrl() }, workflows: { prefix: 'x' } as never }),
    ]);
    expect(err).toBeInstanceOf(IdempotencyConfigError);
    expect((err as Error).message).toContain('workflows.prefix: unknown option; did you mean workflows.queuePrefix?');
  });

  it('forRootAsync: a typo in the factory result is refused the same way', async () => {
    const err = await bootError([
      IdempotencyModule.forRootAsync({
        useFactory: () => ({ postgres: { url: databaseUrl(), schema: uniqueSchema('unk') }, redis: false as const, http: { requierd: true } as never }),
      }),
    ]);
    expect(err).toBeInstanceOf(IdempotencyConfigError);
    expect((err as Error).message).toContain('http.requierd: unknown option; did you mean http.required?');
  });

  it('@Workflow() and @Step() typos fail bootstrap with an IdempotencyConfigError naming the nearest option', async () => {
    @Workflow({ retension: '1d' } as never)
    class Typos {
      async run(): Promise<void> {}
      @Step({ timout: '1s' } as never)
      async step(): Promise<void> {}
    }
    const err = await bootError(
      [IdempotencyModule.forRoot({ postgres: { url: databaseUrl(), schema: uniqueSchema('unk') }, redis: { url: redisUrl() }, migrationsRun: true })],
      [Typos],
    );
    expect(err).toBeInstanceOf(IdempotencyConfigError);
    expect((err as Error).message).toContain('unknown option "retension"; did you mean retention?');
    expect((err as Error).message).toContain('unknown option "timout"; did you mean timeout?');
  });
});
