import { HttpStatus, Inject, Injectable, Optional, RequestMethod, Type } from '@nestjs/common';
import { HTTP_CODE_METADATA, INTERCEPTORS_METADATA, METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { IdempotencyInterceptor } from '../http/idempotency.interceptor';
import { IDEMPOTENCY_PROBLEMS, PROBLEM_CONTENT_TYPE } from '../http/problem-details';
import { IdempotencyMetadataAccessor } from '../idempotency-metadata.accessor';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import { IDEMPOTENCY_MODULE_OPTIONS } from '../idempotency.module-definition';
import type { IdempotencyModuleOptions } from '../interfaces/idempotency-options.interface';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { loadPeerIfInstalled, Peers } from '../utils/optional-peer';
import { resolveRouteOptions } from '../utils/validate-options';

type Swagger = Peers['@nestjs/swagger'];
type Handler = (...args: unknown[]) => unknown;

/** Where @nestjs/swagger keeps an operation's parameters and responses (`DECORATORS.*`, not exported by its index). */
const API_PARAMETERS_METADATA = 'swagger/apiParameters';
const API_RESPONSE_METADATA = 'swagger/apiResponse';

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
 * The entries this library put in swagger's metadata. Metadata lives on the controller class, which two apps in one
 * process (tests) share: an app's module-wide settings replace the entries another app wrote, and leave the user's.
 */
const OURS = new WeakSet<object>();

/** What the interceptor does on a route, as documented: the header it reads and whether it refuses a request without. */
interface Coverage {
  header: string;
  required: boolean;
}

/**
 * With `@nestjs/swagger` installed, documents on every operation the interceptor acts on — exactly as it decides it:
 * `@Idempotent()` routes, and without it the `http.methods` (POST, PATCH) of routes the interceptor runs on (every
 * route with `http.global`, else those with `@UseInterceptors(IdempotencyInterceptor)`), never `@SkipIdempotency()` —
 * the key header under the module's `http.header` name, required when the route (or `http.required`) requires it,
 * the 409 (in progress) and 422 (key reused) problem responses, and 400 for a missing key where it is required.
 * Runs while providers are created, so the document is right even when built before `app.init()` / `listen()`.
 */
@Injectable()
export class IdempotencyOpenApi {
  constructor(
    discovery: DiscoveryService,
    scanner: MetadataScanner,
    private readonly metadata: IdempotencyMetadataAccessor,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    @Optional() @Inject(IDEMPOTENCY_MODULE_OPTIONS) given?: IdempotencyModuleOptions,
  ) {
    const swagger = loadPeerIfInstalled('@nestjs/swagger');
    if (!swagger) return;
    // The header as the app spelled it (resolved options hold it lower-cased, as Node presents request headers).
    const spelled = given?.http?.header;
    const header = typeof spelled === 'string' && spelled.toLowerCase() === options.http.header ? spelled : displayName(options.http.header);
    for (const wrapper of discovery.getControllers()) {
      const controller = wrapper.metatype as Type<unknown> | null | undefined;
      const prototype = (controller as { prototype?: object } | null | undefined)?.prototype;
      if (typeof controller !== 'function' || !prototype) continue;
      for (const name of scanner.getAllMethodNames(prototype)) {
        const handler = (prototype as Record<string, unknown>)[name];
        if (typeof handler !== 'function' || Reflect.getMetadata(PATH_METADATA, handler) === undefined) continue;
        document(swagger, controller, handler as Handler, this.coverage(controller, handler as Handler, header));
      }
    }
  }

  /** Whether, and how, the interceptor acts on this route (mirrors `IdempotencyInterceptor.intercept`). */
  private coverage(controller: Type<unknown>, handler: Handler, header: string): Coverage | undefined {
    const http = this.options.http;
    if (!http.enabled) return undefined;
    const meta = this.metadata.forRoute(controller, handler);
    if (meta.skip) return undefined;
    // @Idempotent() says the route is idempotent: documented even with `http.global: false`, where the app applies
    // the interceptor in a way not visible here (app.useGlobalInterceptors, its own APP_INTERCEPTOR).
    if (meta.options) return { header, required: resolveRouteOptions(http, meta.options, handler.name).required };
    if (!http.global && !appliesInterceptor(controller, handler)) return undefined;
    const method = RequestMethod[Reflect.getMetadata(METHOD_METADATA, handler) as RequestMethod];
    const acts = method === 'ALL' ? http.methods.size > 0 : http.methods.has(method);
    return acts ? { header, required: http.required } : undefined;
  }
}

/** `@UseInterceptors(IdempotencyInterceptor)` (or a subclass) on the route or its controller. */
function appliesInterceptor(controller: Type<unknown>, handler: Handler): boolean {
  const listed = [
    ...((Reflect.getMetadata(INTERCEPTORS_METADATA, controller) ?? []) as unknown[]),
    ...((Reflect.getMetadata(INTERCEPTORS_METADATA, handler) ?? []) as unknown[]),
  ];
  return listed.some((i) => i === IdempotencyInterceptor || i instanceof IdempotencyInterceptor ||
    (typeof i === 'function' && (i as { prototype?: unknown }).prototype instanceof IdempotencyInterceptor));
}

/** `idempotency-key` → `Idempotency-Key`. */
function displayName(header: string): string {
  return header.replace(/(^|-)([a-z])/g, (_m, dash: string, c: string) => `${dash}${c.toUpperCase()}`);
}

/** Replaces this library's header parameter and problem responses on the route (removes them when not covered). */
function document(swagger: Swagger, controller: Type<unknown>, handler: Handler, coverage: Coverage | undefined): void {
  const parameters = ((Reflect.getMetadata(API_PARAMETERS_METADATA, handler) ?? []) as object[]).filter((p) => !OURS.has(p));
  const responses = Object.fromEntries(Object.entries((Reflect.getMetadata(API_RESPONSE_METADATA, handler) ?? {}) as Record<string, object>)
    .filter(([, entry]) => !OURS.has(entry)));
  if (coverage) {
    parameters.push(ours(built(API_PARAMETERS_METADATA, swagger.ApiHeader({
      name: coverage.header,
      required: coverage.required,
      description: 'A unique key per operation (1–255 printable ASCII characters). A retry with the same key and request replays ' +
        'the stored response (with `Idempotent-Replayed: true`) instead of running the operation again.',
      schema: { type: 'string', minLength: 1, maxLength: 255 },
    }))[0]));
    const problem = (code: keyof typeof IDEMPOTENCY_PROBLEMS, description: string) => {
      const status = IDEMPOTENCY_PROBLEMS[code].status;
      if (responses[status] !== undefined) return; // the route documents this status itself
      responses[status] = ours(built(API_RESPONSE_METADATA, swagger.ApiResponse({
        status,
        description: `${IDEMPOTENCY_PROBLEMS[code].title}: ${description}`,
        content: { [PROBLEM_CONTENT_TYPE]: { schema: PROBLEM_SCHEMA } },
      }))[status]);
    };
    // Swagger documents its default success response only for operations that declare none: keep it.
    const declaredSuccess = [responses, (Reflect.getMetadata(API_RESPONSE_METADATA, controller) ?? {}) as object]
      .some((declared) => Object.keys(declared).some((status) => /^2/.test(status)));
    problem('in-progress', 'a request with this key is still running; retry after `Retry-After` seconds');
    problem('key-reused', 'this key was used with a different request (method, path or body)');
    if (coverage.required) problem('missing-key', `the \`${coverage.header}\` header is missing or invalid`);
    if (!declaredSuccess) {
      const status = (Reflect.getMetadata(HTTP_CODE_METADATA, handler) as number | undefined) ??
        (Reflect.getMetadata(METHOD_METADATA, handler) === RequestMethod.POST ? HttpStatus.CREATED : HttpStatus.OK);
      responses[status] = ours(built(API_RESPONSE_METADATA, swagger.ApiResponse({ status, description: '' }))[status]);
    }
  }
  // None left: no metadata at all, as swagger writes it (an empty response map would hide its default success response).
  if (parameters.length > 0) Reflect.defineMetadata(API_PARAMETERS_METADATA, parameters, handler);
  else Reflect.deleteMetadata(API_PARAMETERS_METADATA, handler);
  if (Object.keys(responses).length > 0) Reflect.defineMetadata(API_RESPONSE_METADATA, responses, handler);
  else Reflect.deleteMetadata(API_RESPONSE_METADATA, handler);
}

/** The metadata entry a swagger method decorator writes, built on a scratch method (its shape stays swagger's own). */
function built<T = Record<string | number, object> & object[]>(key: string, decorator: MethodDecorator): T {
  const descriptor: PropertyDescriptor = { value: function scratch() {} };
  decorator({}, 'scratch', descriptor);
  return Reflect.getMetadata(key, descriptor.value as object) as T;
}

function ours<T extends object>(entry: T): T {
  OURS.add(entry);
  return entry;
}
