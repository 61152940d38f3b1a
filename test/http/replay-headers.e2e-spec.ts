// A replay keeps the headers the rest of the pipeline sets on this response (request ids, CORS) and replaces
// those that describe a body (ETag, Content-Language, Content-Type…) by the stored ones, however the adapter
// hands them to Node: Express sets them on the response, Fastify passes them to writeHead.
import { CallHandler, Controller, ExecutionContext, Injectable, Module, NestInterceptor, Post } from '@nestjs/common';
import { APP_INTERCEPTOR, HttpAdapterHost } from '@nestjs/core';
import type { Observable } from 'rxjs';
import { Harness, Runs, startApp } from '../support/http-harness';
import { ADAPTERS } from '../support/test-app';

@Controller('orders')
class OrdersController {
  constructor(private readonly runs: Runs) {}

  @Post()
  create() {
    return { id: this.runs.inc('orders') };
  }
}

/** Sets a header of its own and two body headers on every response, numbered per request. */
@Injectable()
class StampingInterceptor implements NestInterceptor {
  private n = 0;

  constructor(private readonly adapterHost: HttpAdapterHost) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const n = ++this.n;
    const adapter = this.adapterHost.httpAdapter;
    const response: unknown = context.switchToHttp().getResponse();
    adapter.setHeader(response, 'X-Request-Id', `req-${n}`);
    adapter.setHeader(response, 'ETag', `"outer-${n}"`);
    adapter.setHeader(response, 'Content-Language', 'de');
    return next.handle();
  }
}

/** Imported before IdempotencyModule, so that it runs outside the idempotency interceptor (it runs on replays too). */
@Module({ providers: [{ provide: APP_INTERCEPTOR, useClass: StampingInterceptor }] })
class StampingModule {}

describe.each(ADAPTERS)('a replay keeps the pipeline\'s own headers and replaces the body\'s (%s)', (adapter) => {
  let h: Harness;

  beforeAll(async () => {
    h = await startApp({
      adapter,
      controllers: [OrdersController],
      importsBefore: [StampingModule],
    });
  });
  afterAll(() => h?.close());

  it('sends the stored body headers and this request\'s other headers', async () => {
    const send = () => h.http().post('/orders').set('Idempotency-Key', 'stamped').send({ amount: 1 });
    const first = await send();
    expect(first.status).toBe(201);
    expect(first.headers['x-request-id']).toBe('req-1');
    expect(first.headers.etag).toBe('"outer-1"');

    const replay = await send();
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
    expect(replay.headers['x-request-id']).toBe('req-2');
    expect(replay.headers.etag).toBe('"outer-1"'); // stored (allow-listed), not this request's "outer-2"
    expect(replay.headers['content-language']).toBeUndefined(); // describes a body, not stored
    expect(replay.headers['content-type']).toBe(first.headers['content-type']);
    expect(replay.headers['content-length']).toBe(String(Buffer.byteLength(first.text)));
    expect(h.runs('orders')).toBe(1);
  });
});
