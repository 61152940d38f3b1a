import { SetMetadata } from '@nestjs/common';
import { IDEMPOTENT_ROUTE_METADATA, SKIP_IDEMPOTENCY_METADATA } from '../idempotency.constants';
import type { IdempotentRouteOptions } from '../interfaces/idempotency-options.interface';
import { validateRouteOptions } from './route-options';

/**
 * Opts a route (or every route of a controller) into `Idempotency-Key` handling, whatever its method,
 * and overrides the module's HTTP settings for it. Invalid options fail when the class is loaded. With
 * `@nestjs/swagger` installed the module documents the key header and the 409/422 problem responses on it.
 */
export function Idempotent(options: IdempotentRouteOptions = {}): MethodDecorator & ClassDecorator {
  validateRouteOptions(options);
  return SetMetadata(IDEMPOTENT_ROUTE_METADATA, options);
}

/** Opts a route (or a controller) out of idempotency handling: the header is ignored and nothing is stored. */
export function SkipIdempotency(): MethodDecorator & ClassDecorator {
  return SetMetadata(SKIP_IDEMPOTENCY_METADATA, true);
}
