// Issue 14: with @nestjs/swagger installed, @Idempotent() documents the Idempotency-Key header (required when the
// route requires it) and the 409/422 problem+json responses; the test reads the generated OpenAPI document.
import { Controller, Get, HttpCode, INestApplication, Post } from '@nestjs/common';
import { ApiCreatedResponse, DocumentBuilder, OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import { Test } from '@nestjs/testing';
import { Idempotent, IdempotencyTestingModule, PROBLEM_CONTENT_TYPE } from '../../lib';

@Controller()
class OrdersController {
  @Post('orders')
  @Idempotent({ required: true })
  create() {
    return { id: 1 };
  }

  @Post('refunds')
  @Idempotent()
  refund() {
    return { id: 2 };
  }

  @Post('captures')
  @HttpCode(202)
  @Idempotent()
  capture() {
    return { id: 4 };
  }

  @Post('invoices')
  @Idempotent()
  @ApiCreatedResponse({ description: 'the invoice' })
  invoice() {
    return { id: 5 };
  }

  @Get('orders')
  list() {
    return [];
  }
}

@Controller('payouts')
@Idempotent({ required: true })
class PayoutsController {
  @Post()
  pay() {
    return { id: 3 };
  }
}

describe('OpenAPI (@nestjs/swagger)', () => {
  let app: INestApplication;
  let document: OpenAPIObject;

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyTestingModule.forRoot()],
      controllers: [OrdersController, PayoutsController],
    }).compile();
    app = moduleRef.createNestApplication();
    app.useLogger(false);
    document = SwaggerModule.createDocument(app, new DocumentBuilder().setTitle('shop').build());
  });

  afterAll(() => app?.close());

  const header = (path: string, method: 'get' | 'post') =>
    (document.paths[path][method]?.parameters ?? []).find((p) => 'in' in p && p.in === 'header' && p.name === 'Idempotency-Key') as
      | { required?: boolean; schema?: { maxLength?: number } }
      | undefined;

  it('documents the header as required on a route with required: true, with the 409, 422 and 400 problems', () => {
    expect(header('/orders', 'post')).toMatchObject({ required: true, schema: { maxLength: 255 } });
    const responses = document.paths['/orders'].post!.responses as Record<string, { content?: Record<string, unknown> }>;
    for (const status of ['409', '422', '400']) expect(Object.keys(responses[status]?.content ?? {})).toEqual([PROBLEM_CONTENT_TYPE]);
    expect(responses['201']).toBeDefined();
  });

  it('documents an optional header on a route that does not require it (no 400)', () => {
    expect(header('/refunds', 'post')).toMatchObject({ required: false });
    const responses = document.paths['/refunds'].post!.responses;
    expect(Object.keys(responses).sort()).toEqual(['201', '409', '422']);
  });

  it('keeps the operation\'s own success response: @HttpCode() or a declared 2xx', () => {
    expect(Object.keys(document.paths['/captures'].post!.responses).sort()).toEqual(['202', '409', '422']);
    expect(document.paths['/invoices'].post!.responses['201']).toMatchObject({ description: 'the invoice' });
  });

  it('applies to every route of a controller decorated as a whole, and leaves other routes alone', () => {
    expect(header('/payouts', 'post')).toMatchObject({ required: true });
    expect(header('/orders', 'get')).toBeUndefined();
    expect(document.paths['/orders'].get!.responses['409']).toBeUndefined();
  });
});
