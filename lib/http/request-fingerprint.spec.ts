import type { IdempotencyRequest } from '../interfaces/idempotency-options.interface';
import { BodyNotFingerprintableError } from '../errors/body-not-fingerprintable.error';
import { requestFingerprint } from './request-fingerprint';

function req(method: string, url: string, body?: unknown, originalUrl?: string, headers: IdempotencyRequest['headers'] = {}): IdempotencyRequest {
  return { method, url, originalUrl, headers, body };
}

function typed(contentType: string, body: unknown, extra: Partial<IdempotencyRequest> = {}): IdempotencyRequest {
  return { method: 'POST', url: '/pay', headers: { 'content-type': contentType, 'content-length': '10' }, body, ...extra };
}

const fp = (r: IdempotencyRequest, ignore: string[] = []) => requestFingerprint(r, ignore);

describe('requestFingerprint', () => {
  it('is stable and URL-safe', () => {
    const a = fp(req('POST', '/pay', { amount: 1 }));
    expect(a).toBe(fp(req('POST', '/pay', { amount: 1 })));
    expect(a).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('ignores object key order at every depth', () => {
    expect(fp(req('POST', '/pay', { b: 2, a: 1 }))).toBe(fp(req('POST', '/pay', { a: 1, b: 2 })));
    expect(fp(req('POST', '/pay', { o: { y: [1, { d: 1, c: 2 }], x: 1 } }))).toBe(fp(req('POST', '/pay', { o: { x: 1, y: [1, { c: 2, d: 1 }] } })));
  });

  it('keeps array order significant', () => {
    expect(fp(req('POST', '/pay', { items: [1, 2] }))).not.toBe(fp(req('POST', '/pay', { items: [2, 1] })));
  });

  it('differs by method, path, query and body', () => {
    const base = fp(req('POST', '/pay', { amount: 1 }));
    expect(fp(req('PATCH', '/pay', { amount: 1 }))).not.toBe(base);
    expect(fp(req('POST', '/pay2', { amount: 1 }))).not.toBe(base);
    expect(fp(req('POST', '/pay?x=1', { amount: 1 }))).not.toBe(base);
    expect(fp(req('POST', '/pay', { amount: 2 }))).not.toBe(base);
    expect(fp(req('POST', '/pay', { amount: '1' }))).not.toBe(base);
  });

  it('does not care about the method case', () => {
    expect(fp(req('post', '/pay', { a: 1 }))).toBe(fp(req('POST', '/pay', { a: 1 })));
  });

  it('uses originalUrl (full path with query) when the framework sets it', () => {
    expect(fp(req('POST', '/pay', {}, '/api/pay?x=1'))).toBe(fp(req('POST', '/api/pay?x=1', {})));
    expect(fp(req('POST', '/pay', {}, '/api/pay?x=1'))).not.toBe(fp(req('POST', '/pay', {})));
  });

  it('treats no body, null and undefined alike, but not an empty object or string', () => {
    const none = fp(req('POST', '/pay'));
    expect(fp(req('POST', '/pay', null))).toBe(none);
    expect(fp(req('POST', '/pay', {}))).not.toBe(none);
    expect(fp(req('POST', '/pay', ''))).not.toBe(none);
  });

  it('keeps text, raw bytes and JSON bodies apart', () => {
    const text = fp(req('POST', '/pay', '{"a":1}'));
    const json = fp(req('POST', '/pay', { a: 1 }));
    const raw = fp(req('POST', '/pay', Buffer.from('{"a":1}')));
    expect(new Set([text, json, raw]).size).toBe(3);
    expect(fp(req('POST', '/pay', Buffer.from('abc')))).toBe(fp(req('POST', '/pay', Buffer.from('abc'))));
    expect(fp(req('POST', '/pay', Buffer.from('abc')))).not.toBe(fp(req('POST', '/pay', Buffer.from('abd'))));
  });

  it('does not let parts run into each other', () => {
    expect(fp(req('POST', '/pa', 'y'))).not.toBe(fp(req('POST', '/p', 'ay')));
  });

  it('leaves out ignored body fields, including dotted paths, without touching the request', () => {
    const body = { amount: 1, sentAt: 'now', meta: { sentAt: 't1', id: 7 } };
    const other = { amount: 1, sentAt: 'later', meta: { sentAt: 't2', id: 7 } };
    expect(fp(req('POST', '/pay', body), ['sentAt', 'meta.sentAt'])).toBe(fp(req('POST', '/pay', other), ['sentAt', 'meta.sentAt']));
    expect(fp(req('POST', '/pay', body), ['sentAt'])).not.toBe(fp(req('POST', '/pay', other), ['sentAt']));
    expect(fp(req('POST', '/pay', { ...body, meta: { ...body.meta, id: 8 } }), ['sentAt', 'meta.sentAt'])).not.toBe(fp(req('POST', '/pay', other), ['sentAt', 'meta.sentAt']));
    expect(body).toEqual({ amount: 1, sentAt: 'now', meta: { sentAt: 't1', id: 7 } });
  });

  it('ignores missing paths in ignored fields', () => {
    expect(fp(req('POST', '/pay', { a: 1 }), ['x.y.z', 'a.b'])).toBe(fp(req('POST', '/pay', { a: 1 })));
  });

  it('tags the body kind: bytes spelling a JSON body, or its canonical form with any prefix, never match it', () => {
    const json = fp(typed('application/json', { amount: 10 }));
    for (const text of ['{"amount":10}', 'j:{"amount":10}', 'data:{"amount":10}']) {
      expect(fp(typed('application/json', Buffer.from(text)))).not.toBe(json);
      expect(fp(typed('application/octet-stream', Buffer.from(text)))).not.toBe(json);
      expect(fp(typed('text/plain', text))).not.toBe(json);
    }
  });

  it('tags the media type, without its parameters', () => {
    expect(fp(typed('application/json', { a: '1' }))).not.toBe(fp(typed('application/x-www-form-urlencoded', { a: '1' })));
    expect(fp(typed('application/json; charset=utf-8', { a: 1 }))).toBe(fp(typed('Application/JSON', { a: 1 })));
  });

  it('fingerprints JSON nested far deeper than the call stack', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(fp(req('POST', '/pay', deep))).toBe(fp(req('POST', '/pay', deep)));
    expect(fp(req('POST', '/pay', deep))).not.toBe(fp(req('POST', '/pay', [deep])));
  });

  it('refuses a body announced but not parsed', () => {
    expect(() => fp(req('POST', '/pay', undefined, undefined, { 'content-length': '12', 'content-type': 'multipart/form-data; boundary=x' })))
      .toThrow(BodyNotFingerprintableError);
    expect(() => fp(req('POST', '/pay', undefined, undefined, { 'transfer-encoding': 'chunked' }))).toThrow(BodyNotFingerprintableError);
    expect(fp(req('POST', '/pay', undefined, undefined, { 'content-length': '0' }))).toBe(fp(req('POST', '/pay')));
  });

  describe('multipart', () => {
    const boundary = (b: string) => `multipart/form-data; boundary=${b}`;
    const file = (content: string, name = 'a.txt') => ({ fieldname: 'file', originalname: name, mimetype: 'text/plain', buffer: Buffer.from(content) });

    it('covers multer files and fields, not the boundary', () => {
      const a = fp(typed(boundary('x1'), { caption: 'hi' }, { file: file('one') }));
      expect(fp(typed(boundary('x2'), { caption: 'hi' }, { file: file('one') }))).toBe(a);
      expect(fp(typed(boundary('x1'), { caption: 'hi' }, { file: file('two') }))).not.toBe(a);
      expect(fp(typed(boundary('x1'), { caption: 'ho' }, { file: file('one') }))).not.toBe(a);
      expect(fp(typed(boundary('x1'), { caption: 'hi' }, { file: file('one', 'b.txt') }))).not.toBe(a);
      expect(fp(typed(boundary('x1'), { caption: 'hi' }, { files: [file('one')] }))).toBe(a);
      expect(fp(typed(boundary('x1'), { caption: 'hi' }, { files: { file: [file('one')] } }))).toBe(a);
    });

    it('covers @fastify/multipart parts (attachFieldsToBody true and keyValues)', () => {
      const field = (value: string) => ({ type: 'field', fieldname: 'caption', value, fields: {} });
      const part = (content: string) => ({ type: 'file', fieldname: 'file', filename: 'a.txt', mimetype: 'text/plain', _buf: Buffer.from(content), toBuffer: () => 1 });
      const a = fp(typed(boundary('x'), { caption: field('hi'), file: part('one') }));
      expect(fp(typed(boundary('y'), { caption: field('hi'), file: part('one') }))).toBe(a);
      expect(fp(typed(boundary('x'), { caption: field('hi'), file: part('two') }))).not.toBe(a);
      expect(fp(typed(boundary('x'), { caption: field('ho'), file: part('one') }))).not.toBe(a);
      const kv = fp(typed(boundary('x'), { caption: 'hi', file: Buffer.from('one') }));
      expect(fp(typed(boundary('x'), { caption: 'hi', file: Buffer.from('two') }))).not.toBe(kv);
    });

    it('covers express-fileupload files (by field, `name` and `data`)', () => {
      const upload = (content: string) => ({ name: 'a.txt', mimetype: 'text/plain', data: Buffer.from(content), tempFilePath: '' });
      const a = fp(typed(boundary('x'), { caption: 'hi' }, { files: { file: upload('one') } }));
      expect(fp(typed(boundary('y'), { caption: 'hi' }, { files: { file: upload('one') } }))).toBe(a);
      expect(fp(typed(boundary('x'), { caption: 'hi' }, { files: { file: upload('two') } }))).not.toBe(a);
      expect(fp(typed(boundary('x'), { caption: 'hi' }, { files: { other: upload('one') } }))).not.toBe(a);
    });

    it('refuses a file whose content is neither in memory nor on disk', () => {
      expect(() => fp(typed(boundary('x'), {}, { file: { fieldname: 'file', originalname: 'a' } }))).toThrow(BodyNotFingerprintableError);
    });

    it('hashes a file stored on disk (async)', async () => {
      const { mkdtempSync, writeFileSync } = await import('node:fs');
      const { join } = await import('node:path');
      const { tmpdir } = await import('node:os');
      const dir = mkdtempSync(join(tmpdir(), 'fp-'));
      writeFileSync(join(dir, 'one'), 'one');
      writeFileSync(join(dir, 'two'), 'two');
      const onDisk = (name: string) => typed(boundary('x'), {}, { file: { fieldname: 'file', originalname: 'a.txt', mimetype: 'text/plain', path: join(dir, name) } });
      const inMemory = await fp(typed(boundary('x'), {}, { file: file('one') }));
      expect(await fp(onDisk('one'))).toBe(inMemory);
      expect(await fp(onDisk('two'))).not.toBe(inMemory);
    });
  });
});
