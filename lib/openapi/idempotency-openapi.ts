import { HttpStatus, RequestMethod } from '@nestjs/common';
import { HTTP_CODE_METADATA, METHOD_METADATA } from '@nestjs/common/constants';
import { IDEMPOTENCY_PROBLEMS, PROBLEM_CONTENT_TYPE } from '../http/problem-details';
import type { IdempotentRouteOptions } from '../interfaces/idempotency-options.interface';
import { loadPeerIfInstalled } from '../utils/optional-peer';

/** Where @nestjs/swagger keeps an operation's responses (`DECORATORS.API_RESPONSE`, not exported by its index). */
const API_RESPONSE_METADATA = 'swagger/apiResponse';

/** The header the OpenAPI operation documents (the module's `http.header` is not known when the decorator runs). */
const HEADER = 'Idempotency-Key';

const PROBLEM_SCHEMA = {
  type: 'object',
  description: 'RFC 9457 problem details',
  required: ['type', 'title', 'status', 'detail', 'code'],
  properties: {
    type: { type: 'string', format: 'uri-reference' },
    title: { type: 'string' },
    status: { type: 'integer' },
    detail: { type: 'string' },
    code: { type: 'string', enum: Object.keys(IDEMPOTENCY_PROBLEMS) },
  },
};

/**
 * With `@nestjs/swagger` installed, what `@Idempotent()` adds to the operation: the `Idempotency-Key` header parameter
 * (required when the route says `required: true`), and the 409 (in progress) and 422 (key reused with another
 * request) problem responses, plus 400 for a missing key on a route that requires one. Nothing without the package.
 */
export function idempotencyOpenApi(options: IdempotentRouteOptions): Array<MethodDecorator & ClassDecorator> {
  const swagger = loadPeerIfInstalled('@nestjs/swagger');
  if (!swagger) return [];
  const required = options.required === true;
  const problem = (code: keyof typeof IDEMPOTENCY_PROBLEMS, description: string) =>
    swagger.ApiResponse({
      status: IDEMPOTENCY_PROBLEMS[code].status,
      description: `${IDEMPOTENCY_PROBLEMS[code].title}: ${description}`,
      content: { [PROBLEM_CONTENT_TYPE]: { schema: PROBLEM_SCHEMA } },
    });
  return [
    swagger.ApiHeader({
      name: HEADER,
      required,
      description: 'A unique key per operation (1–255 printable ASCII characters). A retry with the same key and request replays ' +
        'the stored response (with `Idempotent-Replayed: true`) instead of running the operation again.',
      schema: { type: 'string', minLength: 1, maxLength: 255 },
    }),
    problem('in-progress', 'a request with this key is still running; retry after `Retry-After` seconds'),
    problem('key-reused', 'this key was used with a different request (method, path or body)'),
    ...(required ? [problem('missing-key', `the \`${HEADER}\` header is missing or invalid`)] : []),
    keepDefaultSuccess(swagger.ApiResponse),
  ];
}

/**
 * Swagger documents a default success response (201 for POST, else 200, or the `@HttpCode()`) only for operations
 * that declare no response; the problem responses above would hide it. Once every decorator of the method has run
 * (a microtask later), the default is added back unless the route declares a 2xx of its own.
 */
function keepDefaultSuccess(apiResponse: (options: { status: number; description: string }) => MethodDecorator & ClassDecorator): MethodDecorator & ClassDecorator {
  const decorator = (target: object, key?: string | symbol, descriptor?: PropertyDescriptor): void => {
    if (key === undefined || !descriptor || typeof descriptor.value !== 'function') return; // on a class: class responses hide nothing
    const method = descriptor.value as object;
    queueMicrotask(() => {
      const declared = (Reflect.getMetadata(API_RESPONSE_METADATA, method) ?? {}) as Record<string, unknown>;
      if (Object.keys(declared).some((status) => /^2/.test(status))) return;
      const status = (Reflect.getMetadata(HTTP_CODE_METADATA, method) as number | undefined) ??
        (Reflect.getMetadata(METHOD_METADATA, method) === RequestMethod.POST ? HttpStatus.CREATED : HttpStatus.OK);
      apiResponse({ status, description: '' })(target, key, descriptor);
    });
  };
  return decorator;
}
