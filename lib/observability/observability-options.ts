import type { Checker } from '../utils/validate-options';

/** `observability` of the module options: metrics and traces through `@opentelemetry/api` (an optional peer). */
export interface ObservabilityOptions {
  /**
   * Record metrics and spans. Default: on when `@opentelemetry/api` is installed, off (a no-op) when it is not;
   * `true` makes a missing package a startup error, `false` turns both off.
   */
  enabled?: boolean;
  /** Record spans (the interceptor's decision, each store call, workflow runs and steps). Default true. */
  traces?: boolean;
  /** Put the client's key itself on spans (`idempotency.key`); by default spans carry only its scope. Default false. */
  recordKeys?: boolean;
}

/** Observability settings after validation (internal). `enabled` undefined: on when the package is installed. */
export interface ResolvedObservabilityOptions {
  enabled?: boolean;
  traces: boolean;
  recordKeys: boolean;
}

/** Reads `observability` through the checker (which refuses unknown keys). */
export function resolveObservability(c: Checker, given: unknown): ResolvedObservabilityOptions {
  if (given !== undefined && (typeof given !== 'object' || given === null || Array.isArray(given))) {
    c.fail('observability', `expected an object like { enabled: true, traces: true, recordKeys: false }, got ${JSON.stringify(given)}`);
    return { traces: true, recordKeys: false };
  }
  const o: ObservabilityOptions = c.track('observability', given ?? {});
  return {
    enabled: o.enabled === undefined ? undefined : c.boolean('observability.enabled', o.enabled, true),
    traces: c.boolean('observability.traces', o.traces, true),
    recordKeys: c.boolean('observability.recordKeys', o.recordKeys, false),
  };
}
