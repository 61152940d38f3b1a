import { Inject, Injectable } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { trackRouteHandler } from './handler-start';

/** Nest's `PATH_METADATA` key (set by `@Get()`, `@Post()`, …), named here: deep imports are not exported by NestJS 12. */
const ROUTE_PATH_METADATA = 'path';

/**
 * Makes every route handler report when it starts (see `HandlerStart`), so that the interceptor can tell a
 * request refused by a pipe from one the handler answered, and claim an upload's key once it is parsed.
 * Runs while providers are created, because Nest's router keeps the handler function it finds when it
 * registers the routes, before any `onModuleInit`. The class's method is wrapped (controller instances do
 * not exist yet); the wrapper does nothing outside a keyed request, so apps sharing a class are unaffected.
 */
@Injectable()
export class RouteHandlerTracker {
  constructor(discovery: DiscoveryService, scanner: MetadataScanner, @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) options: ResolvedOptions) {
    if (!options.http.enabled) return;
    for (const wrapper of discovery.getControllers()) {
      const prototype = (wrapper.metatype as { prototype?: object } | null | undefined)?.prototype;
      if (typeof wrapper.metatype !== 'function' || !prototype) continue;
      for (const name of scanner.getAllMethodNames(prototype)) {
        const method = (prototype as Record<string, unknown>)[name];
        if (typeof method === 'function' && Reflect.getMetadata(ROUTE_PATH_METADATA, method) !== undefined) trackRouteHandler(prototype, name);
      }
    }
  }
}
