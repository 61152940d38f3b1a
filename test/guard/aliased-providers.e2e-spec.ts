import { INestApplicationContext, Injectable, Module, Provider, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { IdempotencyModule, IdempotentMethod } from '../../lib';
import { databaseUrl, uniqueSchema } from '../support/test-app';

/** A provider reachable through several tokens: every token must lead to a method wrapped exactly once. */
@Injectable()
class CaptureService {
  runs = 0;

  @IdempotentMethod()
  async capture(paymentId: string): Promise<{ captured: string; run: number }> {
    this.runs++;
    return Promise.resolve({ captured: paymentId, run: this.runs });
  }
}

const ALIAS = 'CAPTURE_ALIAS';
const idempotency = () => IdempotencyModule.forRoot({ postgres: { url: databaseUrl(), schema: uniqueSchema('alias') }, redis: false, migrationsRun: true });

function appModule(providers: Provider[], imports: Type<unknown>[] = []): Type<unknown> {
  @Module({ imports: [idempotency(), ...imports], providers })
  class AppModule {}
  return AppModule;
}

function exportingModule(): Type<unknown> {
  @Module({ providers: [CaptureService], exports: [CaptureService] })
  class CaptureModule {}
  return CaptureModule;
}

const shared = new CaptureService();

const SETUPS: [string, () => Type<unknown>][] = [
  ['useExisting alias', () => appModule([CaptureService, { provide: ALIAS, useExisting: CaptureService }])],
  ['useValue under two tokens', () => appModule([{ provide: CaptureService, useValue: shared }, { provide: ALIAS, useValue: shared }])],
  ['useFactory returning the same instance', () => appModule([CaptureService, { provide: ALIAS, useFactory: (s: CaptureService) => s, inject: [CaptureService] }])],
  ['exported by one module, aliased in the importer', () => appModule([{ provide: ALIAS, useExisting: CaptureService }], [exportingModule()])],
];

describe.each(SETUPS)('@IdempotentMethod on a provider reached through several tokens (%s)', (_label, build) => {
  let app: INestApplicationContext;

  beforeAll(async () => {
    shared.runs = 0;
    app = await NestFactory.createApplicationContext(build(), { logger: false });
  });

  afterAll(() => app.close());

  it('runs the method once per key, whichever token the caller used', async () => {
    const direct = app.get(CaptureService, { strict: false });
    const aliased = app.get<CaptureService>(ALIAS, { strict: false });
    expect(aliased).toBe(direct);
    expect(await direct.capture('p-1')).toEqual({ captured: 'p-1', run: 1 });
    expect(await aliased.capture('p-1')).toEqual({ captured: 'p-1', run: 1 });
    expect(await aliased.capture('p-2')).toEqual({ captured: 'p-2', run: 2 });
    expect(direct.runs).toBe(2);
  });
});
