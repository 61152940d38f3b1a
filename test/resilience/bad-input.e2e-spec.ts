import { Body, Controller, INestApplication, Post } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import Redis from 'ioredis';
import request from 'supertest';
import { Idempotent, IdempotencyConfigError, IdempotencyModule, IdempotencyModuleOptions, IdempotencySchemaError } from '../../lib';
import { listen } from '../support/resilience';
import { ADAPTERS, createTestApp, databaseUrl, redisUrl, sql, uniqueSchema } from '../support/test-app';

let runs = 0;

@Controller()
class EchoController {
  @Post('echo')
  echo(@Body() body: unknown) {
    runs++;
    return { body };
  }
}

describe.each(ADAPTERS)('bad request bodies (%s)', (adapter) => {
  const schema = uniqueSchema('badin');
  const prefix = `idem-${schema}`;
  let app: INestApplication;
  let url: string;
  let probe: Redis;

  beforeAll(async () => {
    app = await createTestApp({ adapter, schema, controllers: [EchoController] });
    url = await listen(app);
    probe = new Redis(redisUrl());
  });

  afterAll(async () => {
    await app?.close();
    probe?.disconnect();
  });

  async function nothingStored(key: string) {
    expect(await sql(`SELECT 1 FROM "${schema}".idempotency_records WHERE key = $1`, [key])).toEqual([]);
    expect(await probe.keys(`${prefix}:*${key}*`)).toEqual([]);
  }

  it('malformed JSON → 400, the handler does not run, nothing is stored', async () => {
    runs = 0;
    const key = `malformed-${adapter}`;
    const res = await request(url).post('/echo').set('Idempotency-Key', key).set('Content-Type', 'application/json').send('{"amount": 1,');
    expect(res.status).toBe(400);
    expect(runs).toBe(0);
    await nothingStored(key);
    // The key is still free for a well-formed request.
    const ok = await request(url).post('/echo').set('Idempotency-Key', key).send({ amount: 1 });
    expect(ok.status).toBe(201);
    expect(runs).toBe(1);
  });

  it('a body over the parser limit → 413, the handler does not run, nothing is stored', async () => {
    runs = 0;
    const key = `huge-${adapter}`;
    const huge = JSON.stringify({ blob: 'x'.repeat(2 * 1024 * 1024) });
    const res = await request(url).post('/echo').set('Idempotency-Key', key).set('Content-Type', 'application/json').send(huge);
    expect(res.status).toBe(413);
    expect(runs).toBe(0);
    await nothingStored(key);
  });
});

function base(): IdempotencyModuleOptions {
  return { postgres: { url: databaseUrl(), schema: uniqueSchema('cfg') }, redis: { url: redisUrl() }, migrationsRun: true };
}

async function bootstrapError(options: unknown): Promise<unknown> {
  let app: INestApplication | undefined;
  try {
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot(options as IdempotencyModuleOptions)],
      controllers: [EchoController],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
  } catch (err) {
    return err;
  } finally {
    await app?.close();
  }
  throw new Error('bootstrap succeeded; expected it to be rejected');
}

describe('invalid module options reject bootstrap', () => {
  it.each<[string, string, Record<string, unknown>]>([
    ['http.ttl: "abc"', 'http.ttl', { http: { ttl: 'abc' } }],
    ['postgres: {}', 'postgres.url', { postgres: {} }],
    ['redis: "x"', 'redis', { redis: 'x' }],
    ['http.lockTimeout: -1', 'http.lockTimeout', { http: { lockTimeout: -1 } }],
    ['redis.breaker.resetAfter: "soon"', 'redis.breaker.resetAfter', { redis: { url: 'redis://127.0.0.1:1', breaker: { resetAfter: 'soon' } } }],
  ])('%s → IdempotencyConfigError naming %s', async (_name, option, bad) => {
    const err = await bootstrapError({ ...base(), ...bad });
    expect(err).toBeInstanceOf(IdempotencyConfigError);
    expect((err as Error).message).toContain(`${option}:`);
  });

  it('lists several bad options in one error', async () => {
    const err = await bootstrapError({ postgres: {}, redis: 'x', http: { ttl: 'abc' } });
    expect(err).toBeInstanceOf(IdempotencyConfigError);
    for (const option of ['postgres.url:', 'redis:', 'http.ttl:']) expect((err as Error).message).toContain(option);
  });

  it('forRootAsync validates the resolved options too', async () => {
    let caught: unknown;
    try {
      await Test.createTestingModule({
        imports: [IdempotencyModule.forRootAsync({ useFactory: () => ({ ...base(), http: { ttl: 'abc' } }) })],
      }).compile();
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(IdempotencyConfigError);
    expect((caught as Error).message).toContain('http.ttl:');
  });

  it('@Idempotent({ ttl: "nope" }) throws when the decorator is applied', () => {
    expect(() => {
      @Idempotent({ ttl: 'nope' })
      class BadController {}
      return BadController;
    }).toThrow(IdempotencyConfigError);
    expect(() => {
      @Controller()
      class BadRoute {
        @Post()
        @Idempotent({ lockTimeout: 'forever' })
        run() {
          return 1;
        }
      }
      return BadRoute;
    }).toThrow(/@Idempotent\(\) on BadRoute\.run: lockTimeout/);
  });

  it('migrationsRun: false on an empty schema → IdempotencySchemaError telling how to migrate', async () => {
    const schema = uniqueSchema('nomig');
    const err = await bootstrapError({ ...base(), postgres: { url: databaseUrl(), schema }, migrationsRun: false });
    expect(err).toBeInstanceOf(IdempotencySchemaError);
    const message = (err as Error).message;
    expect(message).toContain(schema);
    expect(message).toContain('migrationsRun: true');
    expect(message).toContain('IDEMPOTENCY_MIGRATIONS');
    // Nothing was created behind the user's back.
    expect(await sql(`SELECT 1 FROM pg_namespace WHERE nspname = $1`, [schema])).toEqual([]);
  });
});
