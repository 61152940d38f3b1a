import { Body, Controller, INestApplication, Post } from '@nestjs/common';
import request from 'supertest';
import { ADAPTERS, createTestApp } from '../support/test-app';

let runs = 0;
@Controller()
class PayController {
  @Post('pay')
  pay(@Body() body: { amount: number }) {
    runs++;
    return { id: runs, amount: body.amount };
  }
}

describe.each(ADAPTERS)('smoke (%s)', (adapter) => {
  let app: INestApplication;
  beforeAll(async () => {
    app = await createTestApp({ adapter, controllers: [PayController] });
  });
  afterAll(() => app.close());

  it('replays', async () => {
    runs = 0;
    const first = await request(app.getHttpServer()).post('/pay').set('Idempotency-Key', 'k1').send({ amount: 5 });
    const second = await request(app.getHttpServer()).post('/pay').set('Idempotency-Key', 'k1').send({ amount: 5 });
    expect(first.status).toBe(201);
    expect(second.status).toBe(201);
    expect(second.text).toBe(first.text);
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(first.headers['content-type']).toBe(second.headers['content-type']);
    expect(runs).toBe(1);
    const third = await request(app.getHttpServer()).post('/pay').set('Idempotency-Key', 'k1').send({ amount: 6 });
    expect(third.status).toBe(422);
    expect(third.headers['content-type']).toMatch(/application\/problem\+json/);
  });
});
