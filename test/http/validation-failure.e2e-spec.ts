// Issue 16 item 20: a request refused before its handler started (a ValidationPipe 400) releases the key, so the
// corrected request with the same key runs; a 4xx the handler itself throws stays final.
import { BadRequestException, Body, Controller, Header, HttpCode, Post, ValidationPipe } from '@nestjs/common';
import { IsInt, IsPositive } from 'class-validator';
import request from 'supertest';
import { ConfiguredApp, startConfiguredApp } from '../support/configured-app';
import { ADAPTERS, sql } from '../support/test-app';

class CreatePayment {
  @IsInt()
  @IsPositive()
  amount!: number;
}

const runs = new Map<string, number>();
const count = (name: string) => {
  const n = (runs.get(name) ?? 0) + 1;
  runs.set(name, n);
  return n;
};

@Controller()
class PaymentsController {
  @Post('payments')
  @HttpCode(202)
  @Header('X-Route', 'payments')
  create(@Body() body: CreatePayment) {
    // The handler's own refusal is an outcome: it is stored and replayed.
    if (body.amount === 13) throw new BadRequestException('amount 13 is refused by the handler');
    return { run: count('payments'), amount: body.amount, dto: body instanceof CreatePayment };
  }
}

describe.each(ADAPTERS)('validation failures (%s)', (adapter) => {
  let s: ConfiguredApp;
  const pay = (key: string, amount: number) => request(s.url).post('/payments').set('Idempotency-Key', key).send({ amount });
  const statuses = async (key: string) =>
    (await sql<{ status: string }>(`SELECT status FROM "${s.schema}".idempotency_records WHERE key = $1 ORDER BY id`, [key])).map((r) => r.status);

  beforeAll(async () => {
    s = await startConfiguredApp({
      adapter,
      controllers: [PaymentsController],
      setup: { any: (app) => void app.useGlobalPipes(new ValidationPipe({ transform: true })) },
    });
  });
  afterAll(() => s?.close());

  it('a ValidationPipe 400 releases the key: the corrected request runs, and then replays', async () => {
    const key = `invalid-then-fixed-${adapter}`;
    const before = runs.get('payments') ?? 0;
    const invalid = await pay(key, -5);
    expect(invalid.status).toBe(400);
    expect(invalid.headers['idempotent-replayed']).toBeUndefined();
    expect(await statuses(key)).toEqual(['failed']);

    const fixed = await pay(key, 5);
    expect(fixed.status).toBe(202);
    // The wrapped handler keeps its metadata: status code, headers, the DTO's type for the pipe.
    expect(fixed.headers['x-route']).toBe('payments');
    expect(fixed.body).toEqual({ run: before + 1, amount: 5, dto: true });

    const retry = await pay(key, 5);
    expect(retry.status).toBe(202);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body).toEqual(fixed.body);
    expect(runs.get('payments')).toBe(before + 1);
    expect(await statuses(key)).toEqual(['failed', 'completed']);
  });

  it('the same invalid request twice is refused twice by the pipe, not replayed', async () => {
    const key = `invalid-twice-${adapter}`;
    for (let i = 0; i < 2; i++) {
      const res = await pay(key, 0);
      expect(res.status).toBe(400);
      expect(res.headers['idempotent-replayed']).toBeUndefined();
    }
    expect(await statuses(key)).toEqual(['failed', 'failed']);
  });

  it('a 4xx the handler throws stays final: replayed, and another body under the key is 422', async () => {
    const key = `handler-refused-${adapter}`;
    const before = runs.get('payments') ?? 0;
    const first = await pay(key, 13);
    expect(first.status).toBe(400);
    const retry = await pay(key, 13);
    expect(retry.status).toBe(400);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body).toEqual(first.body);
    expect((await pay(key, 14)).status).toBe(422);
    expect(runs.get('payments') ?? 0).toBe(before);
    expect(await statuses(key)).toEqual(['completed']);
  });
});
