import { StreamableFile } from '@nestjs/common';
import { Readable } from 'node:stream';
import { isStreamingValue, StoredResponse, toReplacement, toStoredResponse } from './stored-response';

const ALLOWED = ['Content-Type', 'Location', 'ETag', 'Set-Cookie', 'Transfer-Encoding'];

function roundTrip(body: Buffer, headers: Record<string, string | string[]> = {}) {
  const stored = toStoredResponse({ status: 201, headers, body }, ALLOWED);
  // Through JSON, as Postgres (jsonb) and Redis keep it.
  return { stored, replayed: toReplacement(JSON.parse(JSON.stringify(stored)) as StoredResponse) };
}

describe('stored responses', () => {
  it.each([
    ['UTF-8 text', Buffer.from('{"name":"Zoë 🍌"}')],
    ['bytes that are not UTF-8', Buffer.from([0xff, 0xfe, 0x00, 0x41])],
    ['UTF-8 with a NUL, which jsonb refuses in text', Buffer.from('a\u0000b')],
    ['an empty body', Buffer.alloc(0)],
  ])('keeps %s byte for byte', (_what, body) => {
    const { stored, replayed } = roundTrip(body);
    expect(Buffer.compare(replayed.body, body)).toBe(0);
    expect(JSON.stringify(stored)).not.toContain('\\u0000');
    expect(replayed.status).toBe(201);
  });

  it('stores text as text, so the record stays readable', () => {
    expect(roundTrip(Buffer.from('hello')).stored.body).toEqual({ t: 's', v: 'hello' });
  });

  it('keeps allow-listed headers and the body encoding, never Set-Cookie or hop-by-hop headers', () => {
    const { stored } = roundTrip(Buffer.from('x'), {
      'content-type': 'application/json', etag: '"1"', 'set-cookie': ['a=b'], 'transfer-encoding': 'chunked',
      'content-encoding': 'gzip', 'x-other': '1',
    });
    expect(stored.headers).toEqual({ 'Content-Type': 'application/json', ETag: '"1"', 'Content-Encoding': 'gzip' });
  });

  it.each([
    ['JSON', { t: 'j', v: '{"a":1}' }, '{"a":1}', 'application/json; charset=utf-8'],
    ['an HttpException body', { t: 'x', v: '{"statusCode":400}' }, '{"statusCode":400}', 'application/json; charset=utf-8'],
    ['a string', { t: 's', v: 'plain' }, 'plain', undefined],
    ['undefined', { t: 'e' }, '', undefined],
    ['null', { t: 'n' }, '', undefined],
  ] as const)('replays a record of an earlier version holding %s', (_what, body, text, contentType) => {
    const replayed = toReplacement({ status: 200, headers: {}, body });
    expect(replayed.body.toString()).toBe(text);
    expect(replayed.headers['Content-Type']).toBe(contentType);
  });

  it('tells streams from bodies sent in one piece', () => {
    const streams: unknown[] = [
      new StreamableFile(Buffer.from('f')), Readable.from(['a']), new ReadableStream(), new Response('r'),
      (async function* generate() {
        yield await Promise.resolve(1);
      })(), new ArrayBuffer(2),
    ];
    for (const value of streams) expect(isStreamingValue(value)).toBe(true);
    for (const value of [Buffer.from('b'), new Uint8Array(2), { a: 1 }, [1], 'text', 1, null, undefined]) {
      expect(isStreamingValue(value)).toBe(false);
    }
  });
});
