// Issue 14: the generated OpenAPI document follows the module-wide `http.header` and `http.required`, and documents
// exactly the routes the interceptor acts on: POST/PATCH without @Idempotent() too, not PUT/GET, not @SkipIdempotency();
// with `http.global: false`, routes under @UseInterceptors(IdempotencyInterceptor) (and @Idempotent() ones). Requests
// to the documented routes show the interceptor doing what the document says.
import { Controller, Get, INestApplication, Patch, Post, Put, UseInterceptors } from '@nestjs/common';
import { DocumentBuilder, OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import request from 'supertest';
import { Idempotent, IdempotencyInterceptor, IdempotencyModuleOptions, PROBLEM_CONTENT_TYPE, SkipIdempotency } from '../../lib';
import { listen } from '../support/resilience';
import { createTestApp, sql, uniqueSchema } from '../support/test-app';

jest.setTimeout(60_000);

let runs = 0;

@Controller('charges')
class ChargesController {
  @Post()
  create() {
    return { id: ++runs };
  }

  @Patch(':id')
  amend() {
    return { amended: ++runs };
  }

  @Put(':id')
  replace() {
    return { replaced: ++runs };
  }

  @Get()
  list() {
    return [];
  }

  @Post('preview')
  @SkipIdempotency()
  preview() {
    return { preview: ++runs };
  }

  @Post('optional')
  @Idempotent({ required: false })
  optional() {
    return { optional: ++runs };
  }

  @Get('report')
  @Idempotent()
  report() {
    return { report: ++runs };
  }
}

@Controller('guarded')
@UseInterceptors(IdempotencyInterceptor)
class GuardedController {
  @Post()
  create() {
    return { guarded: ++runs };
  }
}

type Parameter = { in: string; name: string; required?: boolean };

function keyHeaders(document: OpenAPIObject, path: string, method: 'get' | 'post' | 'patch' | 'put'): Parameter[] {
  return ((document.paths[path]?.[method]?.parameters ?? []) as Parameter[]).filter((p) => p.in === 'header');
}

function statuses(document: OpenAPIObject, path: string, method: 'get' | 'post' | 'patch' | 'put'): string[] {
  return Object.keys(document.paths[path][method]!.responses).sort();
}

/** An app of both controllers with these HTTP settings, and its document (built before it listens), for a suite. */
function appForSuite(http: IdempotencyModuleOptions['http']): { app: () => INestApplication; document: () => OpenAPIObject } {
  const schema = uniqueSchema('oas');
  let app: INestApplication | undefined;
  let document: OpenAPIObject | undefined;
  beforeAll(async () => {
    app = await createTestApp({ adapter: 'express', schema, controllers: [ChargesController, GuardedController], options: { http } });
    document = SwaggerModule.createDocument(app, new DocumentBuilder().setTitle('charges').build());
  });
  afterAll(async () => {
    await app?.close();
    await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });
  return { app: () => app!, document: () => document! };
}

describe('OpenAPI: module-wide http.header and http.required', () => {
  const suite = appForSuite({ header: 'X-Request-Key', required: true, scope: 'global' });
  let url: string;
  let document: OpenAPIObject;

  beforeAll(async () => {
    document = suite.document();
    url = await listen(suite.app());
  });

  it('documents POST and PATCH without @Idempotent() under the configured header name, required, with 400/409/422', () => {
    for (const [path, method] of [['/charges', 'post'], ['/charges/{id}', 'patch']] as const) {
      expect(keyHeaders(document, path, method)).toEqual([expect.objectContaining({ name: 'X-Request-Key', required: true })]);
      const responses = document.paths[path][method]!.responses as Record<string, { content?: Record<string, unknown> }>;
      for (const status of ['400', '409', '422']) expect(Object.keys(responses[status]?.content ?? {})).toEqual([PROBLEM_CONTENT_TYPE]);
    }
    expect(statuses(document, '/charges', 'post')).toEqual(['201', '400', '409', '422']);
    expect(statuses(document, '/charges/{id}', 'patch')).toEqual(['200', '400', '409', '422']);
  });

  it('leaves alone the routes the interceptor ignores: PUT, GET, @SkipIdempotency()', () => {
    expect(keyHeaders(document, '/charges/{id}', 'put')).toEqual([]);
    expect(keyHeaders(document, '/charges', 'get')).toEqual([]);
    expect(keyHeaders(document, '/charges/preview', 'post')).toEqual([]);
    expect(statuses(document, '/charges/preview', 'post')).toEqual(['201']);
  });

  it('a route\'s own required: false and @Idempotent() on GET are followed, under the module\'s header name', () => {
    expect(keyHeaders(document, '/charges/optional', 'post')).toEqual([expect.objectContaining({ name: 'X-Request-Key', required: false })]);
    expect(statuses(document, '/charges/optional', 'post')).toEqual(['201', '409', '422']);
    expect(keyHeaders(document, '/charges/report', 'get')).toEqual([expect.objectContaining({ name: 'X-Request-Key', required: true })]);
  });

  it('the interceptor does what the document says', async () => {
    expect((await request(url).post('/charges').send({})).status).toBe(400); // required, no key
    const first = await request(url).post('/charges').set('X-Request-Key', 'oas-1').send({});
    const again = await request(url).post('/charges').set('X-Request-Key', 'oas-1').send({});
    expect(first.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
    const put = await request(url).put('/charges/1').set('X-Request-Key', 'oas-2').send({});
    const putAgain = await request(url).put('/charges/1').set('X-Request-Key', 'oas-2').send({});
    expect(putAgain.headers['idempotent-replayed']).toBeUndefined();
    expect(putAgain.body).not.toEqual(put.body);
    expect((await request(url).post('/charges/optional').send({})).status).toBe(201);
  });
});

describe('OpenAPI: http.global false', () => {
  // The same controller classes as the suite above, another app: its settings replace that app's entries.
  const suite = appForSuite({ global: false, scope: 'global' });
  let document: OpenAPIObject;

  beforeAll(() => {
    document = suite.document();
  });

  it('documents routes under @UseInterceptors(IdempotencyInterceptor) and @Idempotent() ones, with the default header, optional', () => {
    expect(keyHeaders(document, '/guarded', 'post')).toEqual([expect.objectContaining({ name: 'Idempotency-Key', required: false })]);
    expect(statuses(document, '/guarded', 'post')).toEqual(['201', '409', '422']);
    expect(keyHeaders(document, '/charges/optional', 'post')).toEqual([expect.objectContaining({ name: 'Idempotency-Key', required: false })]);
  });

  it('leaves the POST routes the interceptor does not run on undocumented (and nothing of the other app remains)', () => {
    expect(keyHeaders(document, '/charges', 'post')).toEqual([]);
    expect(statuses(document, '/charges', 'post')).toEqual(['201']);
  });
});
