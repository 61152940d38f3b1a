import { Injectable, OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { IdempotencyService } from '../core/idempotency.service';
import { IdempotencyConfigError } from '../errors/idempotency-config.error';
import { IdempotencyMetadataAccessor } from '../idempotency-metadata.accessor';
import { copyMethodMetadata } from '../utils/copy-method-metadata';
import type { IdempotentMethodOptions } from './idempotent-method.decorator';
import { methodKey, MethodKeyRule } from './method-key';

type AnyMethod = (...args: unknown[]) => unknown;

/** Marks a wrapper this library installed, so an instance reached through several tokens is wrapped once. */
const GUARDED = Symbol('nestjs-idempotency:guarded');

function isGuarded(method: unknown): boolean {
  return typeof method === 'function' && (method as unknown as Record<symbol, unknown>)[GUARDED] === true;
}

/**
 * Finds provider methods decorated with `@IdempotentMethod()` and routes their calls through the engine.
 * Only the provider instance is changed, never the class, so several apps in one process stay apart.
 */
@Injectable()
export class IdempotentMethodExplorer implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly metadata: IdempotencyMetadataAccessor,
    private readonly engine: IdempotencyService,
  ) {
    // Checked while providers are being created, before any connection opens, so a refused bootstrap leaves nothing behind.
    for (const wrapper of this.discovery.getProviders()) {
      if (!wrapper.isDependencyTreeStatic()) this.refuseScoped(wrapper.metatype);
    }
  }

  onModuleInit(): void {
    for (const wrapper of this.discovery.getProviders()) {
      if (!wrapper.isDependencyTreeStatic()) continue;
      const instance = wrapper.instance as Record<string, unknown> | undefined;
      if (!instance || typeof instance !== 'object') continue;
      const prototype = Object.getPrototypeOf(instance) as object | null;
      if (!prototype) continue;
      for (const name of this.scanner.getAllMethodNames(prototype)) {
        const method = instance[name] as AnyMethod;
        // One instance can sit behind several providers (useExisting alias, useValue or useFactory returning it,
        // re-exports): wrapping it again would make the outer claim block the inner call forever.
        if (isGuarded(method)) continue;
        const options = this.metadata.forMethod(method);
        // transaction: true where there is no Postgres store fails the bootstrap, not the first call
        if (options?.transaction) this.engine.transactionsFor(`@IdempotentMethod() on ${prototype.constructor.name}.${name}`);
        if (options) instance[name] = this.guard(instance, `${prototype.constructor.name}.${name}`, method, options);
      }
    }
  }

  /** Request-scoped and transient instances are made per request, out of the explorer's reach: say so rather than not guard. */
  private refuseScoped(metatype: unknown): void {
    const prototype = (metatype as { prototype?: object } | null | undefined)?.prototype;
    if (typeof metatype !== 'function' || !prototype) return;
    for (const name of this.scanner.getAllMethodNames(prototype)) {
      const method = (prototype as Record<string, unknown>)[name] as AnyMethod;
      if (this.metadata.forMethod(method)) {
        throw new IdempotencyConfigError([
          `@IdempotentMethod() on ${metatype.name}.${name}: ${metatype.name} is request-scoped or transient (or depends on such a provider); ` +
            'the guard wraps singleton providers only. Move the method to a singleton provider, or call IdempotencyService.run() inside it.',
        ]);
      }
    }
  }

  private guard(instance: object, methodName: string, method: AnyMethod, options: IdempotentMethodOptions): AnyMethod {
    const engine = this.engine;
    const { key: keyFn, namespace, ...runOptions } = options;
    const rule: MethodKeyRule = { methodName, namespace: namespace ?? methodName, keyFn };
    const guarded = async function (this: unknown, ...args: unknown[]) {
      return engine.run(methodKey(rule, args), () => method.apply(instance, args), runOptions);
    };
    copyMethodMetadata(method, guarded);
    Object.defineProperty(guarded, 'name', { value: method.name });
    Object.defineProperty(guarded, GUARDED, { value: true });
    return guarded;
  }
}
