import type { Provider } from '@nestjs/common';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { loadPeer, loadPeerIfInstalled } from '../utils/optional-peer';
import { IdempotencyObserver, NoopObserver } from './idempotency-observer';
import type { ResolvedObservabilityOptions } from './observability-options';
import { ActivatingObserver } from './activating-observer';
import { LibraryLogger } from './library-logger';
import { ObservabilityGauges } from './observability-gauges';
import { IdempotencyHealthIndicator } from '../health/idempotency-health.indicator';
import { IdempotencyConsole } from '../console/idempotency-console.service';
import { ConsoleRoutes } from '../console/console-routes';
import { IdempotencyOpenApi } from '../openapi/idempotency-openapi';

/**
 * The observer for the options: a no-op when disabled or without `@opentelemetry/api`; else one that records
 * through OpenTelemetry once the app has registered a MeterProvider or TracerProvider, and costs nothing before.
 */
export function createObserver(options: ResolvedObservabilityOptions): IdempotencyObserver {
  if (options.enabled === false) return new NoopObserver();
  const api = options.enabled ? loadPeer('@opentelemetry/api', 'observability.enabled') : loadPeerIfInstalled('@opentelemetry/api');
  return api ? new ActivatingObserver(api, options, new LibraryLogger('Idempotency')) : new NoopObserver();
}

/** Binds {@link IdempotencyObserver} (which the engine, the stores and the workflow workers report to), the health indicator, the console and the OpenAPI annotations. */
export const observabilityProviders: Provider[] = [
  {
    provide: IdempotencyObserver,
    useFactory: (options: ResolvedOptions) => createObserver(options.observability),
    inject: [RESOLVED_IDEMPOTENCY_OPTIONS],
  },
  ObservabilityGauges,
  IdempotencyHealthIndicator,
  IdempotencyConsole,
  ConsoleRoutes,
  IdempotencyOpenApi,
];

/** What an app may inject for operating the library. */
export const observabilityExports = [IdempotencyHealthIndicator, IdempotencyConsole];
