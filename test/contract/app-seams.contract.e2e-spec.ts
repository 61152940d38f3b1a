// Behaviours that cross the seams between the interceptor, the engine and the stores, through the public API on
// both implementations (Postgres + Redis, and IdempotencyTestingModule): a unit test against the testing module
// must see what production does for validation failures, uploads, serializers, streams, ttl, the guard and the inbox.
import { Body, ClassSerializerInterceptor, Controller, Injectable, Post, UploadedFile, UseInterceptors, ValidationPipe } from '@nestjs/common';
import { APP_INTERCEPTOR, APP_PIPE } from '@nestjs/core';
import { FileInterceptor } from '@nestjs/platform-express';
import { Exclude } from 'class-transformer';
import { IsInt, IsPositive } from 'class-validator';
import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { Idempotent, IdempotencyConfigError, IdempotencyService, IdempotentMethod, InboxService, StoredFailureError } from '../../lib';
import { countHeldKeyAnswers } from '../support/held-key-answers';
import { Runs } from '../support/http-harness';
import { sleep } from '../support/resilience';
import { APP_IMPLEMENTATIONS, appForSuite } from './app-implementations';

class Payment {
  @IsInt()
  @IsPositive()
  amount!: number;
}

class Account {
  id = 1;
  @Exclude()
  passwordHash = 'secret-hash';
}

/** Long enough for the retry to land well within the ttl after completion, however loaded the machine. */
const SLOW_TTL_MS = 3000;

@Controller('seams')
class SeamsController {
  constructor(private readonly runs: Runs) {}

  @Post('pay')
  pay(@Body() body: Payment) {
    return { run: this.runs.inc('pay'), amount: body.amount };
  }

  @Post('slow')
  @Idempotent({ ttl: SLOW_TTL_MS })
  async slow() {
    const run = this.runs.inc('slow');
    // The key was claimed before this line: past this sleep, claim time + ttl has passed.
    await sleep(SLOW_TTL_MS + 100);
    return { run };
  }

  @Post('upload')
  @UseInterceptors(FileInterceptor('file'))
  upload(@UploadedFile() file: { originalname: string }, @Body() body: { caption: string }) {
    return { run: this.runs.inc('upload'), name: file.originalname, caption: body.caption };
  }

  @Post('account')
  account() {
    this.runs.inc('account');
    return new Account();
  }

  @Post('stream')
  stream() {
    this.runs.inc('stream');
    return new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('streamed'));
        controller.close();
      },
    });
  }
}

@Injectable()
class Stock {
  constructor(private readonly runs: Runs) {}

  @IdempotentMethod({ key: (id: string) => id })
  async reserve(id: string): Promise<{ reserved: number }> {
    return Promise.resolve({ reserved: this.runs.inc(`reserve-${id}`) });
  }

  @IdempotentMethod({ key: (id: string) => id })
  async charge(id: string): Promise<{ charged: number }> {
    return Promise.resolve({ charged: this.runs.inc(`charge-${id}`) });
  }
}

describe.each(APP_IMPLEMENTATIONS)('seams contract: $name', (implementation) => {
  const running = appForSuite(implementation, {
    controllers: [SeamsController],
    providers: [
      Runs, Stock, { provide: 'STOCK_ALIAS', useExisting: Stock },
      { provide: APP_PIPE, useValue: new ValidationPipe({ transform: true }) },
      { provide: APP_INTERCEPTOR, useClass: ClassSerializerInterceptor },
    ],
  });
  const runs = () => running().app.get(Runs);
  const post = (path: string, key: string) => request(running().url).post(path).set('Idempotency-Key', key);

  it('a ValidationPipe 400 releases the key: the corrected request runs, then replays', async () => {
    const key = randomUUID();
    expect((await post('/seams/pay', key).send({ amount: -5 })).status).toBe(400);
    const fixed = await post('/seams/pay', key).send({ amount: 5 });
    expect(fixed.status).toBe(201);
    const retry = await post('/seams/pay', key).send({ amount: 5 });
    expect([retry.status, retry.headers['idempotent-replayed'], retry.body]).toEqual([201, 'true', fixed.body]);
  });

  it('a handler slower than its ttl is replayed: the outcome lives for ttl from completion', async () => {
    const key = randomUUID();
    const first = await post('/seams/slow', key).send({});
    const retry = await post('/seams/slow', key).send({});
    expect([retry.headers['idempotent-replayed'], retry.body]).toEqual(['true', first.body]);
    expect(runs().get('slow')).toBe(1);
  });

  it('an upload parsed by FileInterceptor is fingerprinted: another file under the key is 422, the same one replays', async () => {
    const key = randomUUID();
    const upload = (caption: string, content: string, name: string) =>
      post('/seams/upload', key).field('caption', caption).attach('file', Buffer.from(content), name);
    expect((await upload('first', 'AAA', 'a.txt')).status).toBe(201);
    expect((await upload('second', 'BBB', 'b.txt')).status).toBe(422);
    const retry = await upload('first', 'AAA', 'a.txt');
    expect([retry.status, retry.headers['idempotent-replayed']]).toEqual([201, 'true']);
    expect(runs().get('upload')).toBe(1);
  });

  it('an app-wide ClassSerializerInterceptor: the replay hides the @Exclude()d field as the first response did', async () => {
    const key = randomUUID();
    const first = await post('/seams/account', key).send({});
    const retry = await post('/seams/account', key).send({});
    expect(first.body).toEqual({ id: 1 });
    expect([retry.body, retry.headers['idempotent-replayed']]).toEqual([{ id: 1 }, 'true']);
  });

  it('a web ReadableStream is sent, not stored: the retry runs again', async () => {
    const key = randomUUID();
    const before = runs().get('stream');
    // (Nest's Express adapter itself sends a web stream as `{}`: what matters here is that nothing is stored.)
    const first = await post('/seams/stream', key).send({});
    const retry = await post('/seams/stream', key).send({});
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    expect(runs().get('stream')).toBe(before + 2);
  });

  it('method guard: custom keys are namespaced per method, and an aliased provider runs its method once', async () => {
    const id = randomUUID();
    const alias = running().app.get<Stock>('STOCK_ALIAS');
    expect(await alias.reserve(id)).toEqual({ reserved: 1 });
    expect(await alias.charge(id)).toEqual({ charged: 1 });
    expect(await running().app.get(Stock).charge(id)).toEqual({ charged: 1 });
  });

  it("onDuplicate 'wait': a waiter reports the failure of the run it waited for; a later call runs", async () => {
    const engine = running().app.get(IdempotencyService);
    const key = randomUUID();
    let started = false;
    const heldAnswers = countHeldKeyAnswers(engine);
    // the first run fails only once the waiter waits for it (a call arriving after the failure is a retry, and runs)
    const first = engine.run(key, async () => {
      started = true;
      while (heldAnswers.count() === 0) await sleep(5);
      throw new Error('card declined');
    }).catch((err: Error) => err.message);
    while (!started) await sleep(5);
    const waiter = engine.run(key, () => 'ran', { onDuplicate: 'wait' }).catch((err: unknown) => err);
    while (heldAnswers.count() === 0) await sleep(5);
    heldAnswers.stop();
    expect(await first).toBe('card declined');
    expect(await waiter).toBeInstanceOf(StoredFailureError);
    expect(await engine.run(key, () => 'ran')).toBe('ran');
  });

  it('inbox: an empty message id or consumer is refused with IdempotencyConfigError; the handler does not run', async () => {
    const inbox = running().app.get(InboxService);
    let ran = 0;
    const handler = () => Promise.resolve(ran++);
    await expect(inbox.process('', 'payments', handler)).rejects.toBeInstanceOf(IdempotencyConfigError);
    await expect(inbox.processBatch([{ id: 'm-1' }, { id: '' }], 'payments', handler)).rejects.toBeInstanceOf(IdempotencyConfigError);
    await expect(inbox.process(randomUUID(), '', handler)).rejects.toBeInstanceOf(IdempotencyConfigError);
    expect(ran).toBe(0);
  });
});
