// Runs against NestJS 12: compiled to .build/ and resolved from this folder's node_modules (see package.json).
import 'reflect-metadata';
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Body, Controller, INestApplication, Injectable, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { IdempotencyModule, Idempotent, IdempotentMethod, InboxService } from '../../lib';

let handlerRuns = 0;
let methodRuns = 0;

@Controller('payments')
class PaymentsController {
  @Post()
  @Idempotent({ required: true })
  async create(@Body() body: { amount: number }) {
    handlerRuns++;
    await new Promise((resolve) => setTimeout(resolve, 100));
    return { id: randomUUID(), amount: body.amount };
  }
}

@Injectable()
class Invoices {
  @IdempotentMethod()
  async create(userId: string): Promise<string> {
    methodRuns++;
    return Promise.resolve(`inv-${userId}`);
  }
}

const nestVersion = (JSON.parse(readFileSync(require.resolve('@nestjs/core/package.json'), 'utf8')) as { version: string }).version;

void describe(`nestjs-idempotency on NestJS ${nestVersion}`, () => {
  let app: INestApplication;
  let base: string;
  const schema = `compat_${randomUUID().slice(0, 8)}`;

  before(async () => {
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          postgres: { url: process.env.DATABASE_URL as string, schema },
          redis: { url: process.env.REDIS_URL as string, keyPrefix: schema },
          migrationsRun: true,
        }),
      ],
      controllers: [PaymentsController],
      providers: [Invoices],
    })
    class CompatModule {}
    app = await NestFactory.create(CompatModule, { logger: false });
    await app.listen(0, '127.0.0.1');
    base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  });

  after(async () => {
    await app.close();
  });

  const pay = (key: string | undefined, amount: number) =>
    fetch(`${base}/payments`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
      body: JSON.stringify({ amount }),
    });

  void it('runs the first request, replays the retry byte for byte', async () => {
    const first = await pay('k-1', 10);
    const retry = await pay('k-1', 10);
    assert.equal(first.status, 201);
    assert.equal(retry.status, 201);
    assert.equal(await retry.text(), await first.text());
    assert.equal(retry.headers.get('idempotent-replayed'), 'true');
    assert.equal(first.headers.get('idempotent-replayed'), null);
  });

  void it('refuses a reused key with another payload (422 problem+json) and a missing required key (400)', async () => {
    const reused = await pay('k-1', 11);
    assert.equal(reused.status, 422);
    assert.match(reused.headers.get('content-type') ?? '', /application\/problem\+json/);
    assert.equal((await pay(undefined, 1)).status, 400);
  });

  void it('runs 20 concurrent duplicates once', async () => {
    const before = handlerRuns;
    const responses = await Promise.all(Array.from({ length: 20 }, () => pay('k-storm', 5)));
    assert.equal(handlerRuns - before, 1);
    for (const r of responses) assert.ok(r.status === 201 || r.status === 409, `unexpected ${r.status}`);
  });

  void it('guards a provider method and processes an inbox message once', async () => {
    const invoices = app.get(Invoices);
    assert.equal(await invoices.create('u1'), 'inv-u1');
    assert.equal(await invoices.create('u1'), 'inv-u1');
    assert.equal(methodRuns, 1);
    const inbox = app.get(InboxService);
    assert.equal((await inbox.process('evt-1', 'compat', () => Promise.resolve())).status, 'processed');
    assert.equal((await inbox.process('evt-1', 'compat', () => Promise.resolve())).status, 'duplicate');
  });
});
