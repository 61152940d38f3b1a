// Issue 16 items 7–9: every body a route receives counts for the mismatch check — multipart uploads (files
// and fields), raw bytes kept apart from JSON, and JSON nested deeper than any call stack.
import multipart from '@fastify/multipart';
import { Body, Controller, Post, Req, UploadedFile, UseInterceptors } from '@nestjs/common';
import { FileInterceptor } from '@nestjs/platform-express';
import request, { Response } from 'supertest';
import { ConfiguredApp, startConfiguredApp } from '../support/configured-app';
import { expectProblem } from '../support/http-harness';
import { ADAPTERS, sql } from '../support/test-app';

const runs = new Map<string, number>();
const count = (name: string) => {
  const n = (runs.get(name) ?? 0) + 1;
  runs.set(name, n);
  return n;
};

interface MulterFile {
  originalname: string;
  buffer: Buffer;
}

/** Express: the upload is parsed by multer inside FileInterceptor, after the global interceptor ran. */
@Controller()
class ExpressUploadController {
  @Post('upload')
  @UseInterceptors(FileInterceptor('file'))
  upload(@UploadedFile() file: MulterFile, @Body() body: { caption?: string }) {
    return { run: count('upload:express'), name: file.originalname, content: file.buffer.toString(), caption: body.caption };
  }

  @Post('echo')
  echo(@Body() body: unknown) {
    return { run: count('echo:express'), kind: Buffer.isBuffer(body) ? 'bytes' : typeof body };
  }

  @Post('deep')
  deep() {
    return { run: count('deep:express') };
  }
}

interface FastifyPart {
  type: 'file' | 'field';
  filename?: string;
  value?: string;
  toBuffer?: () => Promise<Buffer>;
}

/** Fastify: @fastify/multipart with attachFieldsToBody parses the upload before Nest's pipeline. */
@Controller()
class FastifyUploadController {
  @Post('upload')
  async upload(@Body() body: { file: FastifyPart; caption?: FastifyPart }) {
    const content = (await body.file.toBuffer!()).toString();
    return { run: count('upload:fastify'), name: body.file.filename, content, caption: body.caption?.value };
  }

  @Post('echo')
  echo(@Body() body: unknown) {
    return { run: count('echo:fastify'), kind: Buffer.isBuffer(body) ? 'bytes' : typeof body };
  }

  @Post('deep')
  deep() {
    return { run: count('deep:fastify') };
  }
}

/** Fastify without attachFieldsToBody: the handler itself reads the upload stream. */
@Controller()
class StreamingUploadController {
  @Post('stream-upload')
  async upload(@Req() req: { file(): Promise<{ toBuffer(): Promise<Buffer> } | undefined> }) {
    const file = await req.file();
    return { run: count('stream-upload'), size: (await file?.toBuffer())?.length };
  }
}

function upload(url: string, key: string, file: { name: string; content: string }, caption: string): Promise<Response> {
  return request(url).post('/upload').set('Idempotency-Key', key).field('caption', caption).attach('file', Buffer.from(file.content), file.name);
}

describe.each(ADAPTERS)('request bodies in the fingerprint (%s)', (adapter) => {
  let s: ConfiguredApp;
  const records = async (key: string) => sql<{ status: string }>(`SELECT status FROM "${s.schema}".idempotency_records WHERE key = $1`, [key]);

  beforeAll(async () => {
    s = await startConfiguredApp({
      adapter,
      controllers: adapter === 'express' ? [ExpressUploadController] : [FastifyUploadController],
      setup: {
        express: (app) => void app.useBodyParser('raw', { type: 'application/octet-stream' }),
        fastify: async (app) => {
          await app.register(multipart, { attachFieldsToBody: true });
          app.useBodyParser('application/octet-stream');
        },
      },
    });
  });
  afterAll(() => s?.close());

  it('a multipart upload with another file or caption under the same key → 422; the same upload replays', async () => {
    const key = `upload-${adapter}`;
    const first = await upload(s.url, key, { name: 'a.txt', content: 'first file' }, 'hello');
    expect(first.status).toBe(201);
    expect(first.body).toEqual({ run: 1, name: 'a.txt', content: 'first file', caption: 'hello' });

    // The same upload again (a new multipart boundary each time) is the same request.
    const retry = await upload(s.url, key, { name: 'a.txt', content: 'first file' }, 'hello');
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body).toEqual(first.body);

    expectProblem(await upload(s.url, key, { name: 'a.txt', content: 'other file' }, 'hello'), 422);
    expectProblem(await upload(s.url, key, { name: 'a.txt', content: 'first file' }, 'bye'), 422);
    expectProblem(await upload(s.url, key, { name: 'b.txt', content: 'first file' }, 'hello'), 422);
    expect(runs.get(`upload:${adapter}`)).toBe(1);
    expect(await records(key)).toEqual([{ status: 'completed' }]);
  });

  it('raw bytes never share a fingerprint with a JSON body, whatever they spell', async () => {
    const key = `kinds-${adapter}`;
    const json = await request(s.url).post('/echo').set('Idempotency-Key', key).set('Content-Type', 'application/json').send('{"amount":10}');
    expect(json.status).toBe(201);
    expect(json.body).toEqual({ run: 1, kind: 'object' });
    for (const spelled of ['{"amount":10}', 'j:{"amount":10}']) {
      const bytes = await request(s.url).post('/echo').set('Idempotency-Key', key).set('Content-Type', 'application/octet-stream').send(Buffer.from(spelled));
      expectProblem(bytes, 422);
    }
    expect(runs.get(`echo:${adapter}`)).toBe(1);
    // A raw body is fingerprinted by its bytes: the same bytes replay, other bytes are refused.
    const raw = (text: string) => request(s.url).post('/echo').set('Idempotency-Key', `${key}-raw`).set('Content-Type', 'application/octet-stream').send(Buffer.from(text));
    expect((await raw('abc')).body).toEqual({ run: 2, kind: 'bytes' });
    expect((await raw('abc')).headers['idempotent-replayed']).toBe('true');
    expectProblem(await raw('abd'), 422);
    expect(runs.get(`echo:${adapter}`)).toBe(2);
  });

  it('deeply nested JSON is fingerprinted (no 500): the first runs, the retry replays, another depth is refused', async () => {
    const key = `deep-${adapter}`;
    const nested = (depth: number) => `${'['.repeat(depth)}1${']'.repeat(depth)}`;
    const send = (depth: number) => request(s.url).post('/deep').set('Idempotency-Key', key).set('Content-Type', 'application/json').send(nested(depth));
    const first = await send(40_000);
    expect(first.status).toBe(201);
    const retry = await send(40_000);
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expectProblem(await send(39_999), 422);
    expect(runs.get(`deep:${adapter}`)).toBe(1);
  });
});

describe.each(ADAPTERS)('a keyed body nothing parses before the handler (%s)', (adapter) => {
  let s: ConfiguredApp;

  beforeAll(async () => {
    s = await startConfiguredApp({
      adapter,
      controllers: adapter === 'express' ? [ExpressUploadController] : [StreamingUploadController],
      setup: { fastify: async (app) => void (await app.register(multipart)) },
    });
  });
  afterAll(() => s?.close());

  it('is refused with 415 problem+json that says so; the handler does not run; nothing is stored', async () => {
    const key = `unparsed-${adapter}`;
    const path = adapter === 'express' ? '/echo' : '/stream-upload';
    const name = adapter === 'express' ? 'echo:express' : 'stream-upload';
    const before = runs.get(name) ?? 0;
    // Express has no parser for octet-stream here; the Fastify route reads its upload stream itself.
    const res = adapter === 'express'
      ? await request(s.url).post(path).set('Idempotency-Key', key).set('Content-Type', 'application/octet-stream').send(Buffer.from('payload'))
      : await request(s.url).post(path).set('Idempotency-Key', key).attach('file', Buffer.from('payload'), 'p.bin');
    const problem = expectProblem(res, 415);
    expect(problem.detail).toMatch(/fingerprint/);
    // What to do depends on the body: a parser for its media type, or a multipart interceptor for an upload.
    expect(problem.detail).toMatch(adapter === 'express' ? /body parser for application\/octet-stream/ : /FileInterceptor/);
    expect(runs.get(name) ?? 0).toBe(before);
    expect(await sql(`SELECT 1 FROM "${s.schema}".idempotency_records WHERE key = $1`, [key])).toEqual([]);
    // Without a key the route works as before.
    const plain = adapter === 'express'
      ? await request(s.url).post(path).set('Content-Type', 'application/octet-stream').send(Buffer.from('payload'))
      : await request(s.url).post(path).attach('file', Buffer.from('payload'), 'p.bin');
    expect(plain.status).toBe(201);
  });
});
