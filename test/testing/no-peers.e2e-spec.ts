// IdempotencyTestingModule must run without Postgres, Redis or BullMQ installed: every peer that talks to them
// throws here as soon as anything requires it, and the whole library plus a test app must still load and work.
jest.mock('ioredis', () => {
  throw new Error('ioredis was loaded');
});
jest.mock('bullmq', () => {
  throw new Error('bullmq was loaded');
});
jest.mock('pg', () => {
  throw new Error('pg was loaded');
});
jest.mock('typeorm', () => {
  throw new Error('typeorm was loaded');
});
jest.mock('@nestjs/typeorm', () => {
  throw new Error('@nestjs/typeorm was loaded');
});

import { Controller, INestApplication, Injectable, Post } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { IdempotencyService, IdempotencyTestingModule, IdempotentMethod, InboxService, RetentionService, Step, Workflow, WorkflowClient } from '../../lib';

@Injectable()
class Counter {
  runs = 0;

  @IdempotentMethod()
  async bump(_id: string): Promise<number> {
    return Promise.resolve(++this.runs);
  }
}

@Controller('things')
class ThingsController {
  private created = 0;

  @Post()
  create(): { n: number } {
    return { n: ++this.created };
  }
}

@Workflow({ name: 'two-steps' })
class TwoSteps {
  async run(input: { x: number }): Promise<number> {
    return this.double(await this.double(input.x));
  }

  @Step()
  async double(x: number): Promise<number> {
    return Promise.resolve(x * 2);
  }
}

describe('IdempotencyTestingModule loads no Postgres, Redis or BullMQ package', () => {
  let app: INestApplication;

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyTestingModule.forRoot()],
      controllers: [ThingsController],
      providers: [Counter, TwoSteps],
    }).compile();
    app = moduleRef.createNestApplication();
    app.useLogger(false);
    await app.init();
  });

  afterAll(async () => {
    await app?.close();
  });

  it('the trap is armed: requiring a peer here throws', () => {
    for (const peer of ['ioredis', 'bullmq', 'pg', 'typeorm']) {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      expect(() => require(peer) as unknown).toThrow(`${peer} was loaded`);
    }
  });

  it('HTTP replay, the method guard, the inbox, retention and a workflow all work', async () => {
    const first = await request(app.getHttpServer()).post('/things').set('Idempotency-Key', 'a').send({});
    const again = await request(app.getHttpServer()).post('/things').set('Idempotency-Key', 'a').send({});
    expect([first.status, first.body, again.status, again.body, again.headers['idempotent-replayed']]).toEqual([201, { n: 1 }, 201, { n: 1 }, 'true']);

    const counter = app.get(Counter);
    expect(await counter.bump('x')).toBe(await counter.bump('x'));
    expect(counter.runs).toBe(1);
    await expect(app.get(IdempotencyService).run('k', () => 'once')).resolves.toBe('once');

    const inbox = app.get(InboxService);
    await expect(inbox.process('m-1', 'consumer', () => Promise.resolve('done'))).resolves.toEqual({ status: 'processed', result: 'done' });
    await expect(inbox.process('m-1', 'consumer', () => Promise.resolve('again'))).resolves.toEqual({ status: 'duplicate' });
    await expect(app.get(RetentionService).cleanup()).resolves.toEqual({ records: 0, inbox: 0, workflows: 0 });

    const handle = await app.get(WorkflowClient).start(TwoSteps, { x: 3 });
    await expect(handle.result()).resolves.toBe(12);
  });
});
