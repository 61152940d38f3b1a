// Issue 7 item 10: `http: { global: false }` leaves the interceptor to the app, which places it with
// `@UseInterceptors()` (in either order relative to a serializer) or with its own APP_INTERCEPTOR.
import { Body, ClassSerializerInterceptor, Controller, Post, UseInterceptors } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { Exclude } from 'class-transformer';
import { IdempotencyInterceptor } from '../../lib';
import { Harness, Runs, startApp } from '../support/http-harness';
import { ADAPTERS } from '../support/test-app';

const SECRET = 'hash-that-stays-home';

class Account {
  id!: number;
  @Exclude()
  secret!: string;

  constructor(fields: Partial<Account>) {
    Object.assign(this, fields);
  }
}

function account(runs: Runs, name: string): Account {
  return new Account({ id: runs.inc(name), secret: SECRET });
}

@Controller('plain')
class PlainController {
  constructor(private readonly runs: Runs) {}

  @Post()
  create(@Body() _body: unknown) {
    return { id: this.runs.inc('plain') };
  }
}

@Controller('guarded')
@UseInterceptors(IdempotencyInterceptor)
class GuardedController {
  constructor(private readonly runs: Runs) {}

  @Post()
  create(@Body() _body: unknown) {
    return { id: this.runs.inc('guarded') };
  }
}

/** The idempotency interceptor outside the serializer: it sees the entity, the wire sees the serialized JSON. */
@Controller('outside')
@UseInterceptors(IdempotencyInterceptor, ClassSerializerInterceptor)
class OutsideController {
  constructor(private readonly runs: Runs) {}

  @Post()
  create(@Body() _body: unknown) {
    return account(this.runs, 'outside');
  }
}

/** The idempotency interceptor inside the serializer: it sees the serialized object. */
@Controller('inside')
@UseInterceptors(ClassSerializerInterceptor, IdempotencyInterceptor)
class InsideController {
  constructor(private readonly runs: Runs) {}

  @Post()
  create(@Body() _body: unknown) {
    return account(this.runs, 'inside');
  }
}

describe.each(ADAPTERS)('http.global: false (%s)', (adapter) => {
  describe('the app applies IdempotencyInterceptor with @UseInterceptors()', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await startApp({
        adapter,
        controllers: [PlainController, GuardedController, OutsideController, InsideController],
        options: { http: { global: false } },
      });
    });
    afterAll(() => h?.close());

    it('a route without it is not idempotent: the key is ignored and nothing is stored', async () => {
      for (let i = 0; i < 2; i++) {
        const res = await h.http().post('/plain').set('Idempotency-Key', 'plain-1').send({ a: 1 });
        expect(res.status).toBe(201);
        expect(res.headers['idempotent-replayed']).toBeUndefined();
      }
      expect(h.runs('plain')).toBe(2);
      expect(await h.records('plain-1')).toEqual([]);
    });

    it('the module adds no app-wide interceptor: routes without it pay for none', () => {
      const config = (h.app as unknown as { config: { getGlobalInterceptors(): unknown[] } }).config;
      expect(config.getGlobalInterceptors().filter(Boolean)).toEqual([]);
    });

    it('a controller with it replays', async () => {
      const first = await h.http().post('/guarded').set('Idempotency-Key', 'guarded-1').send({ a: 1 });
      const replay = await h.http().post('/guarded').set('Idempotency-Key', 'guarded-1').send({ a: 1 });
      expect(first.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);
      expect(h.runs('guarded')).toBe(1);
    });

    it.each([['outside', '/outside'], ['inside', '/inside']])(
      'placed %s ClassSerializerInterceptor, the replay is the serialized first response',
      async (name, path) => {
        const key = `${name}-1`;
        const first = await h.http().post(path).set('Idempotency-Key', key).send({ a: 1 });
        const replay = await h.http().post(path).set('Idempotency-Key', key).send({ a: 1 });
        expect(JSON.parse(first.text)).toEqual({ id: 1 });
        expect(replay.headers['idempotent-replayed']).toBe('true');
        expect(replay.text).toBe(first.text);
        expect(h.runs(name)).toBe(1);
        expect(JSON.stringify((await h.records(key))[0].result)).not.toContain(SECRET);
      },
    );
  });

  describe('applied both app-wide (the default) and with @UseInterceptors()', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await startApp({ adapter, controllers: [GuardedController] });
    });
    afterAll(() => h?.close());

    it('acts once: the first request runs and its retry replays', async () => {
      const first = await h.http().post('/guarded').set('Idempotency-Key', 'twice-1').send({ a: 1 });
      const replay = await h.http().post('/guarded').set('Idempotency-Key', 'twice-1').send({ a: 1 });
      expect(first.status).toBe(201);
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(h.runs('guarded')).toBe(1);
      expect(await h.records('twice-1')).toHaveLength(1);
    });
  });

  describe("the app registers IdempotencyInterceptor as its own APP_INTERCEPTOR", () => {
    let h: Harness;
    beforeAll(async () => {
      h = await startApp({
        adapter,
        controllers: [PlainController],
        providers: [{ provide: APP_INTERCEPTOR, useClass: IdempotencyInterceptor }],
        options: { http: { global: false } },
      });
    });
    afterAll(() => h?.close());

    it('every route is idempotent, once', async () => {
      const first = await h.http().post('/plain').set('Idempotency-Key', 'app-1').send({ a: 1 });
      const replay = await h.http().post('/plain').set('Idempotency-Key', 'app-1').send({ a: 1 });
      expect(first.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);
      expect(h.runs('plain')).toBe(1);
      expect((await h.records('app-1')).map((r) => r.status)).toEqual(['completed']);
    });
  });
});
