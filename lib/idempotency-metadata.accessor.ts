import { Injectable, Type } from '@nestjs/common';
import { PATH_METADATA } from '@nestjs/common/constants';
import { Reflector } from '@nestjs/core';
import { IDEMPOTENT_METHOD_METADATA, IDEMPOTENT_ROUTE_METADATA, SKIP_IDEMPOTENCY_METADATA } from './idempotency.constants';
import type { IdempotentRouteOptions } from './interfaces/idempotency-options.interface';
import type { IdempotentMethodOptions } from './guard/idempotent-method.decorator';

/**
 * Nest's own metadata of route parameters (`ROUTE_ARGS_METADATA`, `RESPONSE_PASSTHROUGH_METADATA` and
 * `RouteParamtypes.RESPONSE` / `.NEXT` in `@nestjs/common`), which its package root does not export.
 */
const NEST_ROUTE_ARGS = '__routeArguments__';
const NEST_RESPONSE_PASSTHROUGH = '__responsePassthrough__';
const NEST_RESPONSE_OR_NEXT = new Set([1, 2]);

/** What the decorators say about one route. */
export interface RouteIdempotencyMetadata {
  skip: boolean;
  /** Set when the route or its controller has `@Idempotent()`; method options override the controller's. */
  options?: IdempotentRouteOptions;
}

/** The one place that reads the library's decorator metadata. */
@Injectable()
export class IdempotencyMetadataAccessor {
  constructor(private readonly reflector: Reflector) {}

  forRoute(controller: Type<unknown>, handler: (...args: unknown[]) => unknown): RouteIdempotencyMetadata {
    const skip = this.reflector.getAllAndOverride<boolean>(SKIP_IDEMPOTENCY_METADATA, [handler, controller]) === true;
    const onClass = this.reflector.get<IdempotentRouteOptions | undefined>(IDEMPOTENT_ROUTE_METADATA, controller);
    const onMethod = this.reflector.get<IdempotentRouteOptions | undefined>(IDEMPOTENT_ROUTE_METADATA, handler);
    const options = onClass || onMethod ? { ...onClass, ...onMethod } : undefined;
    return { skip, options };
  }

  /** True when `handler` is a route handler (it has a `@Get()`, `@Post()`, … decorator). */
  isRouteHandler(handler: (...args: unknown[]) => unknown): boolean {
    return Reflect.getMetadata(PATH_METADATA, handler) !== undefined;
  }

  /** True when the route sends its own response (`@Res()` or `@Next()` without `passthrough`), as Nest decides it. */
  respondsItself(controller: Type<unknown>, handler: (...args: unknown[]) => unknown): boolean {
    const args = (Reflect.getMetadata(NEST_ROUTE_ARGS, controller, handler.name) ?? {}) as Record<string, unknown>;
    const handled = Object.keys(args).some((key) => NEST_RESPONSE_OR_NEXT.has(Number(key.split(':')[0])));
    return handled && Reflect.getMetadata(NEST_RESPONSE_PASSTHROUGH, controller, handler.name) !== true;
  }

  /** The `@IdempotentMethod()` options of a provider method, if it has the decorator. */
  forMethod(method: (...args: unknown[]) => unknown): IdempotentMethodOptions | undefined {
    return this.reflector.get<IdempotentMethodOptions | undefined>(IDEMPOTENT_METHOD_METADATA, method);
  }
}
