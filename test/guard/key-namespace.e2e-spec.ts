import { INestApplicationContext, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DuplicateExecutionError, IdempotencyConfigError, IdempotencyModule, IdempotentMethod } from '../../lib';
import { databaseUrl, redisUrl, sql, uniqueSchema } from '../support/test-app';
import { appliedTo } from '../support/applied-method-decorator';

/** Two steps of one order, both keyed by the order id alone. */
@Injectable()
class CheckoutService {
  readonly runs: string[] = [];

  @IdempotentMethod({ key: (orderId: string) => orderId })
  async reserveStock(orderId: string): Promise<string> {
    this.runs.push(`reserve:${orderId}`);
    return Promise.resolve(`reservation-${orderId}`);
  }

  @IdempotentMethod({ key: (orderId: string) => orderId })
  async chargeCard(orderId: string): Promise<string> {
    this.runs.push(`charge:${orderId}`);
    return Promise.resolve(`charge-${orderId}`);
  }

  // Two entry points to one operation share their keys on purpose.
  @IdempotentMethod({ key: (orderId: string) => orderId, namespace: 'refund' })
  async refundFromApi(orderId: string): Promise<string> {
    this.runs.push(`refund-api:${orderId}`);
    return Promise.resolve(`refund-${orderId}-api`);
  }

  @IdempotentMethod({ key: (orderId: string) => orderId, namespace: 'refund', onDuplicate: 'raise' })
  async refundFromSupport(orderId: string): Promise<string> {
    this.runs.push(`refund-support:${orderId}`);
    return Promise.resolve(`refund-${orderId}-support`);
  }
}

describe.each([
  ['Redis + Postgres', true],
  ['Postgres alone', false],
])('@IdempotentMethod keys are namespaced per method (%s)', (_label, withRedis) => {
  const schema = uniqueSchema('ns');
  let app: INestApplicationContext;
  let service: CheckoutService;

  beforeAll(async () => {
    @Module({
      imports: [IdempotencyModule.forRoot({ postgres: { url: databaseUrl(), schema }, redis: withRedis ? { url: redisUrl(), keyPrefix: schema } : false, migrationsRun: true })],
      providers: [CheckoutService],
    })
    class CheckoutModule {}
    app = await NestFactory.createApplicationContext(CheckoutModule, { logger: false });
    service = app.get(CheckoutService);
  });

  afterAll(() => app.close());

  it('two methods with the same custom key each run and keep their own result', async () => {
    expect(await service.reserveStock('o-1')).toBe('reservation-o-1');
    expect(await service.chargeCard('o-1')).toBe('charge-o-1');
    expect(await service.chargeCard('o-1')).toBe('charge-o-1');
    expect(await service.reserveStock('o-1')).toBe('reservation-o-1');
    expect(service.runs.filter((r) => r.endsWith(':o-1'))).toEqual(['reserve:o-1', 'charge:o-1']);
    const keys = await sql<{ key: string }>(`SELECT key FROM "${schema}".idempotency_records WHERE key LIKE '%:o-1' ORDER BY key`);
    expect(keys.map((r) => r.key)).toEqual(['CheckoutService.chargeCard:o-1', 'CheckoutService.reserveStock:o-1']);
  });

  it('methods with one explicit namespace share their keys on purpose', async () => {
    expect(await service.refundFromApi('o-2')).toBe('refund-o-2-api');
    const duplicate = service.refundFromSupport('o-2');
    await expect(duplicate).rejects.toBeInstanceOf(DuplicateExecutionError);
    await expect(duplicate).rejects.toMatchObject({ key: 'refund:o-2', status: 'completed' });
    expect(service.runs.filter((r) => r.endsWith(':o-2'))).toEqual(['refund-api:o-2']);
  });
});

describe('@IdempotentMethod namespace option', () => {
  it('fails when the class is loaded unless it is a non-empty name without ":"', () => {
    expect(appliedTo({ namespace: '' })).toThrow(IdempotencyConfigError);
    expect(appliedTo({ namespace: 'billing:refund' })).toThrow(/namespace: .*":"/);
    expect(appliedTo({ namespace: 42 as never })).toThrow(/namespace/);
  });
});
