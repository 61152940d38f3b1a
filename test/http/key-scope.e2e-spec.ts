// SEMANTICS §1 lines 1–4: the key header, its syntax, scopes, which methods act, and `required`.
import { Body, Controller, Delete, Get, Options, Patch, Post, Put } from '@nestjs/common';
import { connect } from 'node:net';
import { Idempotent, IdempotencyRequest, SkipIdempotency } from '../../lib';
import { expectProblem, Harness, Runs, startApp } from '../support/http-harness';
import { ADAPTERS } from '../support/test-app';

@Controller()
class KeyController {
  constructor(private readonly runs: Runs) {}

  @Post('orders')
  create(@Body() body: unknown) {
    return { run: this.runs.inc('orders'), body };
  }

  @Patch('orders/:id')
  patch(@Body() body: unknown) {
    return { run: this.runs.inc('patch'), body };
  }

  @Get('orders')
  list() {
    return { run: this.runs.inc('get') };
  }

  @Put('plain/:id')
  put() {
    return { run: this.runs.inc('put') };
  }

  @Delete('plain/:id')
  remove() {
    return { run: this.runs.inc('delete') };
  }

  @Options('plain/:id')
  options() {
    return { run: this.runs.inc('options') };
  }

  @Put('opted/:id')
  @Idempotent()
  putOptedIn(@Body() body: unknown) {
    return { run: this.runs.inc('putOpted'), body };
  }

  @Post('skipped')
  @SkipIdempotency()
  skipped() {
    return { run: this.runs.inc('skipped') };
  }

  @Post('required')
  @Idempotent({ required: true })
  required() {
    return { run: this.runs.inc('required') };
  }
}

/** Sends a hand-written HTTP/1.1 request (for header bytes the Node client refuses to send) and returns the status. */
function rawStatus(url: string, head: string): Promise<number> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(head));
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      data += chunk;
      const match = /^HTTP\/1\.[01] (\d{3})/.exec(data);
      if (match) {
        socket.destroy();
        resolve(Number(match[1]));
      }
    });
    socket.on('error', reject);
    socket.on('end', () => reject(new Error(`connection closed without a status line: ${JSON.stringify(data)}`)));
  });
}

function tenantOf(request: IdempotencyRequest): string | undefined {
  const value = request.headers['x-tenant'];
  return typeof value === 'string' ? value : undefined;
}

describe.each(ADAPTERS)('key and scope (%s)', (adapter) => {
  describe('default options', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await startApp({ adapter, controllers: [KeyController] });
    });
    afterAll(() => h.close());

    it('reads the key from Idempotency-Key by default and replays', async () => {
      const first = await h.http().post('/orders').set('Idempotency-Key', 'default-header').send({ a: 1 });
      const second = await h.http().post('/orders').set('idempotency-key', 'default-header').send({ a: 1 });
      expect(first.status).toBe(201);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      expect(second.status).toBe(201);
      expect(second.headers['idempotent-replayed']).toBe('true');
      expect(second.text).toBe(first.text);
      expect(h.runs('orders')).toBe(1);
      const rows = await h.records('default-header');
      expect(rows).toHaveLength(1);
      expect(rows[0].status).toBe('completed');
    });

    it('treats the structured-field form "abc" and the bare abc as the same key', async () => {
      const before = h.runs('orders');
      const quoted = await h.http().post('/orders').set('Idempotency-Key', '"sf-key"').send({ a: 2 });
      const bare = await h.http().post('/orders').set('Idempotency-Key', 'sf-key').send({ a: 2 });
      expect(quoted.status).toBe(201);
      expect(bare.status).toBe(201);
      expect(bare.headers['idempotent-replayed']).toBe('true');
      expect(bare.text).toBe(quoted.text);

      const bareFirst = await h.http().post('/orders').set('Idempotency-Key', 'sf-key-2').send({ a: 3 });
      const quotedSecond = await h.http().post('/orders').set('Idempotency-Key', '"sf-key-2"').send({ a: 3 });
      expect(quotedSecond.headers['idempotent-replayed']).toBe('true');
      expect(quotedSecond.text).toBe(bareFirst.text);

      // An escaped quote inside the sf-string is the bare character.
      const escaped = await h.http().post('/orders').set('Idempotency-Key', '"q\\"x"').send({ a: 4 });
      const plain = await h.http().post('/orders').set('Idempotency-Key', 'q"x').send({ a: 4 });
      expect(escaped.status).toBe(201);
      expect(plain.headers['idempotent-replayed']).toBe('true');
      expect(plain.text).toBe(escaped.text);

      expect(h.runs('orders')).toBe(before + 3);
      expect((await h.records('sf-key')).map((r) => r.status)).toEqual(['completed']);
      expect(await h.records('"sf-key"')).toHaveLength(0);
    });

    it('accepts a key of 255 printable ASCII characters', async () => {
      const key = `${'k'.repeat(200)}~!#$%&'()*+,-./:;<=>?@[]^_\`{|} `.padEnd(254, 'z') + 'E';
      expect(key).toHaveLength(255);
      const first = await h.http().post('/orders').set('Idempotency-Key', key).send({ long: true });
      const second = await h.http().post('/orders').set('Idempotency-Key', key).send({ long: true });
      expect(first.status).toBe(201);
      expect(second.status).toBe(201);
      expect(second.headers['idempotent-replayed']).toBe('true');
      expect(await h.records(key)).toHaveLength(1);
      // The same 255 characters in quoted form (257 header characters) are the same key.
      const quoted = await h.http().post('/orders').set('Idempotency-Key', `"${key.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`).send({ long: true });
      expect(quoted.status).toBe(201);
      expect(quoted.headers['idempotent-replayed']).toBe('true');
    });

    const invalidKeys: [string, string][] = [
      ['empty', ''],
      ['blank', '   '],
      ['an empty quoted string', '""'],
      ['256 characters', 'x'.repeat(256)],
      ['256 characters quoted', `"${'x'.repeat(256)}"`],
      ['a control character (tab) inside', 'ab\tcd'],
      ['a control character (tab) inside a quoted key', '"ab\tcd"'],
      ['non-ASCII characters', 'caf\u00e9'],
      ['a malformed quoted string', '"abc'],
      ['a bare quote inside a quoted string', '"a"b"'],
    ];

    it.each(invalidKeys)('refuses a key that is %s with 400 problem+json, runs nothing and stores nothing', async (_label, key) => {
      const rowsBefore = (await h.records()).length;
      const runsBefore = h.runs('orders');
      const res = await h.http().post('/orders').set('Idempotency-Key', key).send({ a: 'invalid' });
      expectProblem(res, 400);
      expect(h.runs('orders')).toBe(runsBefore);
      expect(await h.records()).toHaveLength(rowsBefore);
    });

    it('refuses a key with a raw \\x01 control byte with 400, runs nothing and stores nothing', async () => {
      const rowsBefore = (await h.records()).length;
      const runsBefore = h.runs('orders');
      const body = '{"a":"ctl"}';
      const status = await rawStatus(h.url, [
        'POST /orders HTTP/1.1', 'Host: 127.0.0.1', 'Content-Type: application/json', `Content-Length: ${body.length}`,
        'Idempotency-Key: ab\x01cd', 'Connection: close', '', body,
      ].join('\r\n'));
      expect(status).toBe(400);
      expect(h.runs('orders')).toBe(runsBefore);
      expect(await h.records()).toHaveLength(rowsBefore);
    });

    it('acts on POST and PATCH by default', async () => {
      const p1 = await h.http().patch('/orders/7').set('Idempotency-Key', 'patch-key').send({ qty: 1 });
      const p2 = await h.http().patch('/orders/7').set('Idempotency-Key', 'patch-key').send({ qty: 1 });
      expect(p1.status).toBe(200);
      expect(p2.status).toBe(200);
      expect(p2.headers['idempotent-replayed']).toBe('true');
      expect(p2.text).toBe(p1.text);
      expect(h.runs('patch')).toBe(1);
      expect(await h.records('patch-key')).toHaveLength(1);
    });

    it.each([
      ['GET', 'get', (x: Harness, key: string) => x.http().get('/orders').set('Idempotency-Key', key)],
      ['PUT', 'put', (x: Harness, key: string) => x.http().put('/plain/1').set('Idempotency-Key', key).send({ v: 1 })],
      ['DELETE', 'delete', (x: Harness, key: string) => x.http().delete('/plain/1').set('Idempotency-Key', key)],
      ['OPTIONS', 'options', (x: Harness, key: string) => x.http().options('/plain/1').set('Idempotency-Key', key)],
    ] as const)('ignores a key sent to %s on a route that did not opt in', async (_method, counter, send) => {
      const key = `ignored-${counter}`;
      const before = h.runs(counter);
      const first = await send(h, key);
      const second = await send(h, key);
      expect(first.status).toBeLessThan(300);
      expect(second.status).toBe(first.status);
      expect(second.headers['idempotent-replayed']).toBeUndefined();
      expect(JSON.parse(second.text)).toEqual({ run: before + 2 });
      expect(h.runs(counter)).toBe(before + 2);
      expect(await h.records(key)).toHaveLength(0);
    });

    it('ignores a key sent to HEAD on a route that did not opt in', async () => {
      const first = await h.http().head('/orders').set('Idempotency-Key', 'ignored-head');
      const second = await h.http().head('/orders').set('Idempotency-Key', 'ignored-head');
      expect(first.status).toBe(200);
      expect(second.status).toBe(200);
      expect(second.headers['idempotent-replayed']).toBeUndefined();
      expect(await h.records('ignored-head')).toHaveLength(0);
    });

    it('lets @Idempotent() opt a PUT route in', async () => {
      const first = await h.http().put('/opted/1').set('Idempotency-Key', 'put-opted').send({ v: 1 });
      const second = await h.http().put('/opted/1').set('Idempotency-Key', 'put-opted').send({ v: 1 });
      expect(first.status).toBe(200);
      expect(second.status).toBe(200);
      expect(second.headers['idempotent-replayed']).toBe('true');
      expect(second.text).toBe(first.text);
      expect(h.runs('putOpted')).toBe(1);
      expect((await h.records('put-opted')).map((r) => r.status)).toEqual(['completed']);
    });

    it('lets @SkipIdempotency() opt a POST route out', async () => {
      const first = await h.http().post('/skipped').set('Idempotency-Key', 'skipped-key').send({ v: 1 });
      const second = await h.http().post('/skipped').set('Idempotency-Key', 'skipped-key').send({ v: 1 });
      expect(first.status).toBe(201);
      expect(second.status).toBe(201);
      expect(second.headers['idempotent-replayed']).toBeUndefined();
      expect(h.runs('skipped')).toBe(2);
      expect(await h.records('skipped-key')).toHaveLength(0);
      // Even an invalid key is ignored on a skipped route.
      const invalid = await h.http().post('/skipped').set('Idempotency-Key', 'x'.repeat(300)).send({ v: 1 });
      expect(invalid.status).toBe(201);
    });

    it('refuses a missing key on a @Idempotent({ required: true }) route: 400, no run, nothing stored', async () => {
      const rowsBefore = (await h.records()).length;
      const res = await h.http().post('/required').send({ v: 1 });
      expectProblem(res, 400);
      expect(h.runs('required')).toBe(0);
      expect(await h.records()).toHaveLength(rowsBefore);
      const withKey = await h.http().post('/required').set('Idempotency-Key', 'req-1').send({ v: 1 });
      expect(withKey.status).toBe(201);
      expect(h.runs('required')).toBe(1);
      // Without required, a missing key just runs the handler unprotected.
      const before = h.runs('orders');
      await h.http().post('/orders').send({ v: 1 }).expect(201);
      await h.http().post('/orders').send({ v: 1 }).expect(201);
      expect(h.runs('orders')).toBe(before + 2);
    });
  });

  describe('custom header name', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await startApp({ adapter, controllers: [KeyController], options: { http: { header: 'X-Request-Key' } } });
    });
    afterAll(() => h.close());

    it('reads the key from the configured header and ignores Idempotency-Key', async () => {
      const a = await h.http().post('/orders').set('X-Request-Key', 'custom-1').send({ a: 1 });
      const b = await h.http().post('/orders').set('x-request-key', '"custom-1"').send({ a: 1 });
      expect(a.status).toBe(201);
      expect(b.headers['idempotent-replayed']).toBe('true');
      expect(b.text).toBe(a.text);
      expect(h.runs('orders')).toBe(1);

      const c = await h.http().post('/orders').set('Idempotency-Key', 'custom-2').send({ a: 1 });
      const d = await h.http().post('/orders').set('Idempotency-Key', 'custom-2').send({ a: 1 });
      expect(c.status).toBe(201);
      expect(d.headers['idempotent-replayed']).toBeUndefined();
      expect(h.runs('orders')).toBe(3);
      expect(await h.records('custom-2')).toHaveLength(0);
    });

    it('validates the configured header: 256 characters → 400 problem+json', async () => {
      const res = await h.http().post('/orders').set('X-Request-Key', 'y'.repeat(256)).send({ a: 1 });
      expectProblem(res, 400);
    });
  });

  describe('scope from the request', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await startApp({ adapter, controllers: [KeyController], options: { http: { scope: tenantOf } } });
    });
    afterAll(() => h.close());

    it('keeps the same key in two scopes as two records, each replaying its own response', async () => {
      const a1 = await h.http().post('/orders').set('x-tenant', 'acme').set('Idempotency-Key', 'shared').send({ item: 'a' });
      const b1 = await h.http().post('/orders').set('x-tenant', 'globex').set('Idempotency-Key', 'shared').send({ item: 'a' });
      expect(a1.status).toBe(201);
      expect(b1.status).toBe(201);
      expect(b1.headers['idempotent-replayed']).toBeUndefined();
      expect(h.runs('orders')).toBe(2);
      expect(a1.text).not.toBe(b1.text);

      const a2 = await h.http().post('/orders').set('x-tenant', 'acme').set('Idempotency-Key', 'shared').send({ item: 'a' });
      const b2 = await h.http().post('/orders').set('x-tenant', 'globex').set('Idempotency-Key', 'shared').send({ item: 'a' });
      expect(a2.headers['idempotent-replayed']).toBe('true');
      expect(b2.headers['idempotent-replayed']).toBe('true');
      expect(a2.text).toBe(a1.text);
      expect(b2.text).toBe(b1.text);
      expect(h.runs('orders')).toBe(2);

      const rows = await h.records('shared');
      expect(rows).toHaveLength(2);
      expect(new Set(rows.map((r) => r.scope)).size).toBe(2);
      expect(rows.every((r) => r.status === 'completed')).toBe(true);
    });

    it('does not treat another scope’s different body as a reuse of the key', async () => {
      const a = await h.http().post('/orders').set('x-tenant', 'acme').set('Idempotency-Key', 'per-scope').send({ item: 'x' });
      const b = await h.http().post('/orders').set('x-tenant', 'globex').set('Idempotency-Key', 'per-scope').send({ item: 'y' });
      const none = await h.http().post('/orders').set('Idempotency-Key', 'per-scope').send({ item: 'z' });
      expect(a.status).toBe(201);
      expect(b.status).toBe(201);
      expect(none.status).toBe(201);
      expect(none.headers['idempotent-replayed']).toBeUndefined();
      expect(await h.records('per-scope')).toHaveLength(3);
    });
  });

  describe('module-level required: true', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await startApp({ adapter, controllers: [KeyController], options: { http: { required: true } } });
    });
    afterAll(() => h.close());

    it('refuses POST and PATCH without a key: 400 problem+json, no run, nothing stored', async () => {
      expectProblem(await h.http().post('/orders').send({ a: 1 }), 400);
      expectProblem(await h.http().patch('/orders/1').send({ a: 1 }), 400);
      expect(h.runs('orders')).toBe(0);
      expect(h.runs('patch')).toBe(0);
      expect(await h.records()).toHaveLength(0);
    });

    it('still serves methods it does not act on, and skipped routes, without a key', async () => {
      await h.http().get('/orders').expect(200);
      await h.http().post('/skipped').send({}).expect(201);
      expect(h.runs('get')).toBe(1);
      expect(h.runs('skipped')).toBe(1);
    });

    it('runs with a key', async () => {
      const res = await h.http().post('/orders').set('Idempotency-Key', 'with-key').send({ a: 1 });
      expect(res.status).toBe(201);
      expect(h.runs('orders')).toBe(1);
    });
  });

  describe('configured methods', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await startApp({ adapter, controllers: [KeyController], options: { http: { methods: ['POST', 'PUT'] } } });
    });
    afterAll(() => h.close());

    it('acts on the configured methods only', async () => {
      await h.http().put('/plain/1').set('Idempotency-Key', 'm-put').send({ v: 1 }).expect(200);
      const replay = await h.http().put('/plain/1').set('Idempotency-Key', 'm-put').send({ v: 1 });
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(h.runs('put')).toBe(1);

      await h.http().patch('/orders/1').set('Idempotency-Key', 'm-patch').send({ v: 1 }).expect(200);
      const again = await h.http().patch('/orders/1').set('Idempotency-Key', 'm-patch').send({ v: 1 });
      expect(again.headers['idempotent-replayed']).toBeUndefined();
      expect(h.runs('patch')).toBe(2);
      expect(await h.records('m-patch')).toHaveLength(0);
    });
  });
});
