import { metrics, trace, context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import net from 'node:net';

/** A port nothing listens on (bound, then released): a connection to it is refused. */
export async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** The README recipe: a global MeterProvider whose reader is the Prometheus exporter, serving /metrics on 127.0.0.1. */
export async function startPrometheus(): Promise<{ url: string; scrape(): Promise<string>; stop(): Promise<void> }> {
  const port = await closedPort();
  const exporter = new PrometheusExporter({ host: '127.0.0.1', port });
  const provider = new MeterProvider({ readers: [exporter] });
  metrics.setGlobalMeterProvider(provider);
  await exporter.startServer();
  const url = `http://127.0.0.1:${port}/metrics`;
  return {
    url,
    scrape: async () => (await fetch(url)).text(),
    stop: async () => {
      metrics.disable();
      await provider.shutdown();
    },
  };
}

/** A global tracer provider recording every span in memory, with the async context manager (as NodeSDK sets up). */
export function startSpanRecorder(): { exporter: InMemorySpanExporter; stop(): Promise<void> } {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const manager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(manager);
  trace.setGlobalTracerProvider(provider);
  return {
    exporter,
    stop: async () => {
      trace.disable();
      context.disable();
      await provider.shutdown();
    },
  };
}

/** The value of one sample in Prometheus text format: `name{labels}` with every given label (order free). */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const match = /^[^{ ]+(?:\{(.*)\})? (\S+)/.exec(line);
    if (!match) continue;
    const found = Object.fromEntries([...(match[1] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([k, v]) => found[k] === v)) return Number(match[2]);
  }
  return undefined;
}
