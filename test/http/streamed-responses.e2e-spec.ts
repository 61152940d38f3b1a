// Issue 16 item 19 and SEMANTICS §1 line 10: every streaming or response type Nest can send is recognised on both
// adapters. Streams (Node and web streams, a web Response, async iterables, files, a response written in pieces)
// are sent as they are, not stored, and the key is released; they are never replayed as an empty JSON body.
// Bodies sent in one piece (Buffers, other ArrayBuffer views, a response the handler sends itself) are stored
// as the bytes that went out and replayed byte for byte.
import { Controller, Post, Res } from '@nestjs/common';
import { Readable } from 'node:stream';
import { Harness, Runs, startApp } from '../support/http-harness';
import { ADAPTERS } from '../support/test-app';

/** What Express's response and Fastify's reply share for a handler that answers itself. */
interface OwnResponse {
  status(code: number): unknown;
  header(name: string, value: string): unknown;
  send(body: string): unknown;
}

/** The raw Node response under Express's `res` or Fastify's `reply.raw`. */
function nodeResponse(res: unknown): NodeJS.WritableStream & { setHeader(name: string, value: string): void } {
  return ((res as { raw?: unknown }).raw ?? res) as NodeJS.WritableStream & { setHeader(name: string, value: string): void };
}

@Controller('s')
class StreamsController {
  constructor(private readonly runs: Runs) {}

  @Post('web-stream')
  webStream() {
    const n = this.runs.inc('web-stream');
    return new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(`web stream #${n}`));
        controller.close();
      },
    });
  }

  @Post('web-response')
  webResponse() {
    const n = this.runs.inc('web-response');
    return new Response(`web response #${n}`, { status: 201, headers: { 'content-type': 'text/plain' } });
  }

  @Post('async-iterable')
  asyncIterable() {
    const n = this.runs.inc('async-iterable');
    return (async function* chunks() {
      yield await Promise.resolve(`async #${n}`);
    })();
  }

  @Post('node-stream')
  nodeStream() {
    const n = this.runs.inc('node-stream');
    return Readable.from([`node stream #${n}`]);
  }

  @Post('written-in-pieces')
  writtenInPieces(@Res() res: unknown) {
    const n = this.runs.inc('written-in-pieces');
    const raw = nodeResponse(res);
    raw.setHeader('Content-Type', 'text/plain');
    raw.write(`piece one #${n}, `);
    raw.end(`piece two #${n}`);
  }

  @Post('uint8array')
  uint8array() {
    const n = this.runs.inc('uint8array');
    return new Uint8Array([0, 1, 2, 250, n]);
  }

  @Post('sends-itself')
  sendsItself(@Res() res: OwnResponse) {
    const n = this.runs.inc('sends-itself');
    res.status(202);
    res.header('Content-Type', 'text/plain; charset=utf-8');
    res.send(`sent by the handler #${n}`);
  }
}

describe.each(ADAPTERS)('streamed and binary responses (%s)', (adapter) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startApp({ adapter, controllers: [StreamsController] });
  });
  afterAll(() => h?.close());

  const send = (path: string, key: string) => h.http().post(`/s/${path}`).set('Idempotency-Key', key).send({ a: 1 }).responseType('blob');
  const text = (res: { body: unknown }) => (res.body as Buffer).toString('utf8');

  it.each(['web-stream', 'web-response', 'async-iterable', 'node-stream', 'written-in-pieces'])(
    '%s: sent as it is, not stored, the key released; a retry runs again',
    async (path) => {
      const key = `stream-${path}`;
      const first = await send(path, key);
      const retry = await send(path, key);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      expect(retry.headers['idempotent-replayed']).toBeUndefined();
      expect(retry.status).toBe(first.status);
      expect(h.runs(path)).toBe(2);
      const rows = await h.records(key);
      expect(rows.some((r) => r.status === 'completed' || r.status === 'in_progress')).toBe(false);
      if ((adapter === 'fastify' && path !== 'async-iterable') || path === 'written-in-pieces') {
        // Sent with their content. Nest's Express adapter serializes web streams, a web Response and async iterables
        // as JSON itself, and so does Fastify an async iterable: the first response is already that.
        expect(text(first)).toContain('#1');
        expect(text(retry)).toContain('#2');
      }
    },
  );

  it('an ArrayBuffer view is stored as the bytes sent and replayed byte for byte', async () => {
    const first = await send('uint8array', 'bytes-1');
    const replay = await send('uint8array', 'bytes-1');
    expect(first.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.headers['content-type']).toBe(first.headers['content-type']);
    expect(Buffer.compare(replay.body as Buffer, first.body as Buffer)).toBe(0);
    expect(h.runs('uint8array')).toBe(1);
  });

  it('a response the handler sends itself (@Res()) is stored and replayed without running it', async () => {
    const first = await send('sends-itself', 'own-1');
    expect(first.status).toBe(202);
    expect(text(first)).toBe('sent by the handler #1');
    const replay = await send('sends-itself', 'own-1');
    expect(replay.status).toBe(202);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(text(replay)).toBe(text(first));
    expect(h.runs('sends-itself')).toBe(1);
  });
});
