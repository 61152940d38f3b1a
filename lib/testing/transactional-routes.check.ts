import { Injectable, OnModuleInit, Type } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { IdempotencyService } from '../core/idempotency.service';
import { IdempotencyMetadataAccessor } from '../idempotency-metadata.accessor';

/**
 * Test mode has no Postgres, so `@Idempotent({ transaction: true })` cannot work there: the routes that ask for it
 * fail the bootstrap with one IdempotencyConfigError naming the route, rather than their first request.
 */
@Injectable()
export class TransactionalRoutesCheck implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly metadata: IdempotencyMetadataAccessor,
    private readonly engine: IdempotencyService,
  ) {}

  onModuleInit(): void {
    for (const wrapper of this.discovery.getControllers()) {
      const controller = wrapper.metatype as Type<unknown> | undefined;
      if (typeof controller !== 'function') continue;
      const prototype = controller.prototype as Record<string, unknown>;
      for (const name of this.scanner.getAllMethodNames(prototype)) {
        const handler = prototype[name] as (...args: unknown[]) => unknown;
        if (!this.metadata.isRouteHandler(handler)) continue;
        const route = this.metadata.forRoute(controller, handler);
        if (!route.skip && route.options?.transaction === true) this.engine.transactionsFor(`@Idempotent() on ${controller.name}.${name}`);
      }
    }
  }
}
