import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { IdempotencyConfigError } from '../errors/idempotency-config.error';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { OUTBOX_HANDLER_METADATA } from './outbox-handler.decorator';
import type { OutboxDelivery } from './outbox.interfaces';

/** A discovered `@OutboxHandler()` method, bound to its provider. */
export type OutboxHandlerFn = (delivery: OutboxDelivery) => unknown;

/**
 * Finds the `@OutboxHandler(topic)` methods at module init and checks them against `outbox.topics`: every
 * handler topic has exactly one method where the relay runs, and every method's topic is configured as a handler topic.
 */
@Injectable()
export class OutboxHandlers implements OnModuleInit {
  private readonly handlers = new Map<string, OutboxHandlerFn>();

  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
  ) {}

  onModuleInit(): void {
    const problems: string[] = [];
    const where = new Map<string, string>();
    for (const wrapper of this.discovery.getProviders()) {
      const instance = wrapper.instance as Record<string, unknown> | undefined;
      if (!instance || typeof instance !== 'object' || !wrapper.isDependencyTreeStatic()) continue;
      const prototype = Object.getPrototypeOf(instance) as object;
      for (const name of this.scanner.getAllMethodNames(prototype)) {
        const method = instance[name];
        if (typeof method !== 'function') continue;
        const topic = this.reflector.get<string | undefined>(OUTBOX_HANDLER_METADATA, method);
        if (topic === undefined) continue;
        const here = `${instance.constructor.name}.${name}`;
        const target = this.options.outbox?.topics.get(topic);
        if (!target) problems.push(`@OutboxHandler("${topic}") on ${here}: add outbox.topics["${topic}"] = { to: "handler" }`);
        else if (target.to !== 'handler') problems.push(`@OutboxHandler("${topic}") on ${here}: outbox.topics["${topic}"] goes to ${target.to}; set { to: "handler" }`);
        else if (where.has(topic)) problems.push(`@OutboxHandler("${topic}") on ${here}: ${where.get(topic)} handles it already; keep one`);
        where.set(topic, here);
        this.handlers.set(topic, (delivery) => (method as OutboxHandlerFn).call(instance, delivery));
      }
    }
    // A publish-only instance (relay.enabled: false) delivers nothing, so it needs no handlers.
    for (const [topic, target] of this.options.outbox?.relay.enabled ? this.options.outbox.topics : []) {
      if (target.to === 'handler' && !this.handlers.has(topic)) {
        problems.push(`outbox.topics["${topic}"]: goes to a handler, but no provider method has @OutboxHandler("${topic}"); add one, or set outbox.relay.enabled: false on publish-only instances`);
      }
    }
    if (problems.length > 0) throw new IdempotencyConfigError(problems);
  }

  /** The handler of a topic. */
  get(topic: string): OutboxHandlerFn | undefined {
    return this.handlers.get(topic);
  }
}
