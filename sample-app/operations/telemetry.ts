import { metrics } from '@opentelemetry/api';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';

/**
 * The README's Prometheus recipe, served by the app itself on GET /metrics (OperationsController) instead of the
 * exporter's own port. Imported first by main.ts: the library creates its instruments when its module starts.
 */
export const prometheusExporter = new PrometheusExporter({ preventServerStart: true });
metrics.setGlobalMeterProvider(new MeterProvider({ readers: [prometheusExporter] }));
