// SEMANTICS §1 lines 7–10: what is stored and replayed, which outcomes are final, and unstorable responses.
import {
  BadRequestException, Body, ConflictException, Controller, Header, HttpCode, HttpException, InternalServerErrorException,
  Logger, NotFoundException, Param, Post, Res, StreamableFile, UnprocessableEntityException,
} from '@nestjs/common';
import { Response } from 'supertest';
import { IdempotencyModuleOptions } from '../../lib';
import { Harness, Runs, startApp } from '../support/http-harness';
import { ADAPTERS } from '../support/test-app';

/** What Express's response and Fastify's reply have in common. */
interface PassthroughResponse {
  header(name: string, value: string): unknown;
  status(code: number): unknown;
}

@Controller('r')
class ReplayController {
  constructor(private readonly runs: Runs) {}

  @Post('created')
  created(@Body() body: unknown) {
    return { id: this.runs.inc('created'), body, unicode: 'zß水🍌', nested: { z: 1, a: [3, 2, 1] } };
  }

  @Post('ok')
  @HttpCode(200)
  ok() {
    return { id: this.runs.inc('ok') };
  }

  @Post('accepted')
  @HttpCode(202)
  accepted() {
    return { id: this.runs.inc('accepted'), state: 'queued' };
  }

  @Post('dynamic-status')
  dynamicStatus(@Res({ passthrough: true }) res: PassthroughResponse) {
    const id = this.runs.inc('dynamicStatus');
    res.status(id === 1 ? 202 : 200);
    return { id };
  }

  @Post('static-location')
  @Header('Location', '/static/1')
  staticLocation() {
    return { id: this.runs.inc('staticLocation') };
  }

  @Post('headers')
  headers(@Res({ passthrough: true }) res: PassthroughResponse) {
    const id = this.runs.inc('headers');
    res.header('Location', `/orders/${id}`);
    res.header('ETag', `"v${id}"`);
    res.header('X-Order-Version', String(id));
    res.header('Set-Cookie', `session=s${id}; Path=/; HttpOnly`);
    res.header('X-Not-Listed', String(id));
    return { id };
  }

  @Post('string')
  text() {
    return `plain text #${this.runs.inc('string')}`;
  }

  @Post('empty')
  empty(): void {
    this.runs.inc('empty');
  }

  @Post('no-content')
  @HttpCode(204)
  noContent(): void {
    this.runs.inc('noContent');
  }

  @Post('number')
  number() {
    return 40 + this.runs.inc('number');
  }

  @Post('boolean')
  boolean() {
    this.runs.inc('boolean');
    return true;
  }

  @Post('null')
  nothing() {
    this.runs.inc('null');
    return null;
  }

  @Post('returned/:status')
  returned(@Param('status') status: string, @Res({ passthrough: true }) res: PassthroughResponse) {
    const n = this.runs.inc(`returned-${status}`);
    res.status(Number(status));
    return { message: `returned ${status} #${n}` };
  }

  @Post('throw/:kind')
  fail(@Param('kind') kind: string) {
    const n = this.runs.inc(`throw-${kind}`);
    switch (kind) {
      case '400':
        throw new BadRequestException({ message: `bad request #${n}`, field: 'amount' });
      case '404':
        throw new NotFoundException(`missing #${n}`);
      case '422':
        throw new UnprocessableEntityException(`unprocessable #${n}`);
      case '400-string':
        throw new HttpException(`plain string #${n}`, 400);
      case '403-custom':
        throw new HttpException({ reason: `forbidden #${n}` }, 403);
      case '408':
      case '409':
      case '425':
      case '429':
      case '503':
        throw new HttpException({ message: `retryable #${n}` }, Number(kind));
      case 'conflict':
        throw new ConflictException(`conflict #${n}`);
      case '500':
        throw new InternalServerErrorException(`server error #${n}`);
      default:
        throw new Error(`plain error #${n}`);
    }
  }

  @Post('file')
  file() {
    const n = this.runs.inc('file');
    return new StreamableFile(Buffer.from(`file body #${n}`), { type: 'application/octet-stream' });
  }

  @Post('buffer')
  buffer() {
    return Buffer.from(`buffer body #${this.runs.inc('buffer')}`);
  }
}

const STORES: [string, Partial<IdempotencyModuleOptions>][] = [
  ['Redis + Postgres', {}],
  ['Postgres alone', { redis: false }],
];

// Set-Cookie and hop-by-hop headers cannot be listed (startup refuses them, see validate-options.spec.ts); they are not stored either way.
const REPLAY_HEADERS = ['X-Order-Version'];

describe.each(ADAPTERS)('stored response and replay (%s)', (adapter) => {
  describe.each(STORES)('%s', (_store, storeOptions) => {
    let h: Harness;
    beforeAll(async () => {
      h = await startApp({
        adapter, controllers: [ReplayController], options: { ...storeOptions, http: { replayHeaders: REPLAY_HEADERS } },
      });
    });
    afterAll(() => h.close());

    /** Sends the same request twice with one key; asserts the second is a replay of the first. */
    async function twice(path: string, key: string, body: object = { amount: 1 }): Promise<[Response, Response]> {
      const first = await h.http().post(path).set('Idempotency-Key', key).send(body);
      const second = await h.http().post(path).set('Idempotency-Key', key).send(body);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      expect(second.headers['idempotent-replayed']).toBe('true');
      expect(second.status).toBe(first.status);
      expect(second.text).toBe(first.text);
      expect(second.headers['content-type']).toBe(first.headers['content-type']);
      return [first, second];
    }

    it.each([
      ['/r/created', 201, 'created'],
      ['/r/ok', 200, 'ok'],
      ['/r/accepted', 202, 'accepted'],
    ])('%s: stores and replays status %d and the same body bytes', async (path, status, counter) => {
      const [first] = await twice(path, `status-${counter}`);
      expect(first.status).toBe(status);
      expect(h.runs(counter)).toBe(1);
      // A third time still replays (from whichever store answers now).
      const third = await h.http().post(path).set('Idempotency-Key', `status-${counter}`).send({ amount: 1 });
      expect(third.status).toBe(status);
      expect(third.text).toBe(first.text);
      expect(h.runs(counter)).toBe(1);
      const rows = await h.records(`status-${counter}`);
      expect(rows.map((r) => r.status)).toEqual(['completed']);
    });

    it('replays a status the handler set itself, not the route default', async () => {
      const [first] = await twice('/r/dynamic-status', 'dyn-status');
      expect(first.status).toBe(202);
      expect(h.runs('dynamicStatus')).toBe(1);
    });

    it('replays a Location header set with @Header()', async () => {
      const [first, second] = await twice('/r/static-location', 'static-loc');
      expect(first.headers.location).toBe('/static/1');
      expect(second.headers.location).toBe('/static/1');
    });

    it('replays Location, ETag and configured headers; never Set-Cookie or unlisted headers', async () => {
      const [first, second] = await twice('/r/headers', 'hdr-1');
      expect(h.runs('headers')).toBe(1);
      expect(first.headers.location).toBe('/orders/1');
      expect(first.headers.etag).toBe('"v1"');
      expect(first.headers['x-order-version']).toBe('1');
      expect(first.headers['set-cookie']).toEqual([expect.stringContaining('session=s1')]);
      expect(first.headers['x-not-listed']).toBe('1');

      expect(second.headers.location).toBe('/orders/1');
      expect(second.headers.etag).toBe('"v1"');
      expect(second.headers['x-order-version']).toBe('1');
      expect(second.headers['set-cookie']).toBeUndefined();
      expect(second.headers['x-not-listed']).toBeUndefined();

      const rows = await h.records('hdr-1');
      expect(rows).toHaveLength(1);
      const stored = JSON.stringify(rows[0].result).toLowerCase();
      expect(stored).toContain('/orders/1');
      expect(stored).not.toContain('session=');
      expect(stored).not.toContain('set-cookie');
      expect(stored).not.toContain('x-not-listed');
      expect(stored).not.toContain('"connection"');
      expect(stored).not.toContain('transfer-encoding');
    });

    it('replays a string body byte for byte', async () => {
      const [first] = await twice('/r/string', 'str-1');
      expect(first.status).toBe(201);
      expect(first.text).toBe('plain text #1');
      expect(h.runs('string')).toBe(1);
    });

    it('replays an empty body', async () => {
      const [first] = await twice('/r/empty', 'empty-1');
      expect(first.status).toBe(201);
      expect(first.text).toBe('');
      expect(h.runs('empty')).toBe(1);
    });

    it('replays a 204 No Content', async () => {
      const [first] = await twice('/r/no-content', 'no-content-1');
      expect(first.status).toBe(204);
      expect(h.runs('noContent')).toBe(1);
    });

    it('replays JSON with non-ASCII characters byte for byte', async () => {
      const [first] = await twice('/r/created', 'unicode-1', { name: 'Zoë 🍌', list: [2, 1] });
      expect(JSON.parse(first.text)).toMatchObject({ body: { name: 'Zoë 🍌', list: [2, 1] }, unicode: 'zß水🍌' });
    });

    it.each([
      ['number', '41'],
      ['boolean', 'true'],
      ['null', undefined],
    ])('replays a %s body with the same bytes and Content-Type as the first response', async (kind, text) => {
      const [first] = await twice(`/r/${kind}`, `primitive-${kind}`);
      expect(first.status).toBe(201);
      if (text !== undefined) expect(first.text).toBe(text);
      expect(h.runs(kind)).toBe(1);
    });

    it.each([
      ['400', 400],
      ['404', 404],
      ['422', 422],
      ['403-custom', 403],
      ['400-string', 400],
    ])('stores a thrown %s HttpException and replays the same status and body', async (kind, status) => {
      const key = `final-${kind}`;
      const [first] = await twice(`/r/throw/${kind}`, key);
      expect(first.status).toBe(status);
      expect(first.text).toContain('#1');
      expect(h.runs(`throw-${kind}`)).toBe(1);
      expect((await h.records(key)).map((r) => r.status)).toEqual(['completed']);
    });

    it.each([
      ['408', 408],
      ['409', 409],
      ['conflict', 409],
      ['425', 425],
      ['429', 429],
      ['500', 500],
      ['503', 503],
      ['plain-error', 500],
    ])('releases the key after %s (status %d): a retry runs the handler again', async (kind, status) => {
      const key = `released-${kind}`;
      const first = await h.http().post(`/r/throw/${kind}`).set('Idempotency-Key', key).send({ amount: 1 });
      expect(first.status).toBe(status);
      const retry = await h.http().post(`/r/throw/${kind}`).set('Idempotency-Key', key).send({ amount: 1 });
      expect(retry.status).toBe(status);
      expect(retry.headers['idempotent-replayed']).toBeUndefined();
      expect(h.runs(`throw-${kind}`)).toBe(2);
      const rows = await h.records(key);
      expect(rows.length).toBeGreaterThan(0);
      expect(rows.every((r) => r.status === 'failed')).toBe(true);
    });

    it.each([400, 404])('stores a %d status the handler set itself and returned with, and replays it', async (status) => {
      const key = `returned-final-${status}`;
      const [first] = await twice(`/r/returned/${status}`, key);
      expect(first.status).toBe(status);
      expect(h.runs(`returned-${status}`)).toBe(1);
      expect((await h.records(key)).map((r) => r.status)).toEqual(['completed']);
    });

    it.each([408, 409, 425, 429, 500, 503])('releases the key after a returned %d response: a retry runs the handler again', async (status) => {
      const key = `returned-released-${status}`;
      const first = await h.http().post(`/r/returned/${status}`).set('Idempotency-Key', key).send({ amount: 1 });
      expect(first.status).toBe(status);
      const retry = await h.http().post(`/r/returned/${status}`).set('Idempotency-Key', key).send({ amount: 1 });
      expect(retry.status).toBe(status);
      expect(retry.headers['idempotent-replayed']).toBeUndefined();
      expect(retry.text).toContain('#2');
      expect(h.runs(`returned-${status}`)).toBe(2);
      const rows = await h.records(key);
      expect(rows.every((r) => r.status === 'failed')).toBe(true);
    });

    it('sends a StreamableFile as it is, does not store it, releases the key and logs a warning', async () => {
      const warn = jest.spyOn(Logger.prototype, 'warn');
      const get = () => h.http().post('/r/file').set('Idempotency-Key', 'file-1').send({ amount: 1 }).responseType('blob');
      const first = await get();
      expect(first.status).toBe(201);
      expect((first.body as Buffer).toString()).toBe('file body #1');
      const retry = await get();
      expect(retry.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBeUndefined();
      expect((retry.body as Buffer).toString()).toBe('file body #2');
      expect(h.runs('file')).toBe(2);
      const rows = await h.records('file-1');
      expect(rows.some((r) => r.status === 'completed' || r.status === 'in_progress')).toBe(false);
      expect(warn.mock.calls.some(([message]) => String(message).includes('file-1'))).toBe(true);
      warn.mockRestore();
    });

    it('stores a Buffer as the bytes that were sent and replays them byte for byte', async () => {
      const send = () => h.http().post('/r/buffer').set('Idempotency-Key', 'buffer-1').send({ amount: 1 }).responseType('blob');
      const first = await send();
      expect(first.status).toBe(201);
      const retry = await send();
      expect(retry.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(retry.headers['content-type']).toBe(first.headers['content-type']);
      expect(Buffer.compare(first.body as Buffer, retry.body as Buffer)).toBe(0);
      expect(h.runs('buffer')).toBe(1);
      expect((await h.records('buffer-1')).map((r) => r.status)).toEqual(['completed']);
    });
  });
});
