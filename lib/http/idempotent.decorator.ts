import { SetMetadata } from '@nestjs/common';
import { IDEMPOTENT_ROUTE_METADATA, SKIP_IDEMPOTENCY_METADATA } from '../idempotency.constants';
import type { IdempotentRouteOptions } from '../interfaces/idempotency-options.interface';
import { decoratedName } from '../utils/decorated-name';
import { validateRouteOptions } from './route-options';

/**
 * Opts a route (or every route of a controller) into `Idempotency-Key` handling, whatever its method,
 * and overrides the module's HTTP settings for it. Invalid options fail when the class is loaded. With
 * `@nestjs/swagger` installed the module documents the key header and the 409/422 problem responses on it.
 */
export function Idempotent(options: IdempotentRouteOptions = {}): MethodDecorator & ClassDecorator {
  const setMetadata = SetMetadata(IDEMPOTENT_ROUTE_METADATA, options);
  // Validated where it is applied, so that an error names the controller or route.
  return (<T>(target: object, key?: string | symbol, descriptor?: TypedPropertyDescriptor<T>) => {
    validateRouteOptions(options, decoratedName(target, key));
    if (key === undefined) return (setMetadata as ClassDecorator)(target as () => void);
    return setMetadata(target, key, descriptor!);
  }) as MethodDecorator & ClassDecorator;
}

/** Opts a route (or a controller) out of idempotency handling: the header is ignored and nothing is stored. */
export function SkipIdempotency(): MethodDecorator & ClassDecorator {
  return SetMetadata(SKIP_IDEMPOTENCY_METADATA, true);
}
