import type { IdempotencyRequest } from '../interfaces/idempotency-options.interface';
import { requestFingerprint } from './request-fingerprint';

function req(method: string, url: string, body?: unknown, originalUrl?: string): IdempotencyRequest {
  return { method, url, originalUrl, headers: {}, body };
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
});
