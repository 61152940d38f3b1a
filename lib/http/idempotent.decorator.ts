import { applyDecorators, SetMetadata } from '@nestjs/common';
import { IDEMPOTENT_ROUTE_METADATA, SKIP_IDEMPOTENCY_METADATA } from '../idempotency.constants';
import type { IdempotentRouteOptions } from '../interfaces/idempotency-options.interface';
import { validateRouteOptions } from './route-options';
import { idempotencyOpenApi } from '../openapi/idempotency-openapi';

/**
 * Opts a route (or every route of a controller) into `Idempotency-Key` handling, whatever its method,
 * and overrides the module's HTTP settings for it. Invalid options fail when the class is loaded. With
 * `@nestjs/swagger` installed it also documents the `Idempotency-Key` header and the 409/422 problem responses.
 */
export function Idempotent(options: IdempotentRouteOptions = {}): MethodDecorator & ClassDecorator {
  validateRouteOptions(options);
  return applyDecorators(SetMetadata(IDEMPOTENT_ROUTE_METADATA, options), ...idempotencyOpenApi(options));
}

/** Opts a route (or a controller) out of idempotency handling: the header is ignored and nothing is stored. */
export function SkipIdempotency(): MethodDecorator & ClassDecorator {
  return SetMetadata(SKIP_IDEMPOTENCY_METADATA, true);
}
