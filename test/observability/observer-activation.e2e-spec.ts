// Issue 14: with @opentelemetry/api installed but no MeterProvider or TracerProvider registered, the observer costs
// nothing (the stores' own methods are called, no wrapper); once the app registers providers — here after the app
// started, which used to leave metrics off for good — it records metrics and spans (SDK in-memory exporters).
import { Controller, INestApplication, Post } from '@nestjs/common';
import { metrics } from '@opentelemetry/api';
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import request from 'supertest';
import { IdempotencyObserver } from '../../lib';
import { IdempotencyCache } from '../../lib/storage/idempotency.cache';
import { IdempotencyStore } from '../../lib/storage/idempotency.store';
import { PostgresIdempotencyStore } from '../../lib/storage/postgres/postgres-idempotency.store';
import { RedisIdempotencyCache } from '../../lib/storage/redis/redis-idempotency.cache';
import { listen, waitUntil } from '../support/resilience';
import { createTestApp, sql, uniqueSchema } from '../support/test-app';
import { startSpanRecorder } from './support';

jest.setTimeout(60_000);

@Controller()
class PayController {
  @Post('pay')
  pay() {
    return { paid: true };
  }
}

describe('observer activation', () => {
  const schema = uniqueSchema('act');
  let app: INestApplication;
  let url: string;
  let recorder: ReturnType<typeof startSpanRecorder> | undefined;
  let meterProvider: MeterProvider | undefined;

  beforeAll(async () => {
    app = await createTestApp({ adapter: 'express', schema, controllers: [PayController] });
    url = await listen(app);
  });

  afterAll(async () => {
    await app?.close();
    await recorder?.stop();
    metrics.disable();
    await meterProvider?.shutdown();
    await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });

  const pay = (key: string) => request(url).post('/pay').set('Idempotency-Key', key).send({});

  it('without a registered provider, records nothing and the stores are not wrapped', async () => {
    const observer = app.get(IdempotencyObserver);
    expect(observer.isRecording()).toBe(false);
    const store = app.get(IdempotencyStore);
    const cache = app.get(IdempotencyCache);
    expect(store).toBeInstanceOf(PostgresIdempotencyStore);
    expect(cache).toBeInstanceOf(RedisIdempotencyCache);
    // The store's own methods (bound to the store), not the observer's timing wrappers: nothing is handed to it.
    expect(store.claim.name).toBe('bound claim');
    expect(store.complete.name).toBe('bound complete');
    expect(cache.lookup.name).toBe('bound lookup');
    const storeCalls = jest.spyOn(observer, 'storeCall');
    expect((await pay('before-1')).status).toBe(201);
    expect((await pay('before-1')).headers['idempotent-replayed']).toBe('true');
    expect(storeCalls).not.toHaveBeenCalled();
    storeCalls.mockRestore();
    expect(observer.isRecording()).toBe(false);
  });

  it('records metrics and spans once providers are registered, even after the app started', async () => {
    recorder = startSpanRecorder();
    const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
    const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 60_000 });
    meterProvider = new MeterProvider({ readers: [reader] });
    metrics.setGlobalMeterProvider(meterProvider);

    const spans = recorder.exporter;
    let n = 0;
    // The observer looks for a provider at most once a second: keep sending new keys until a claim is traced.
    await waitUntil('a claim span is recorded', async () => {
      expect((await pay(`after-${n++}`)).status).toBe(201);
      return spans.getFinishedSpans().some((s) => s.name === 'idempotency.postgres.claim');
    });
    expect(app.get(IdempotencyObserver).isRecording()).toBe(true);
    expect(app.get(IdempotencyStore).claim.name).not.toBe('bound claim');
    // The traced request may have begun its decision before activation (its outcome then went uncounted): one more
    // new key runs wholly after it.
    expect((await pay(`after-${n++}`)).status).toBe(201);

    const sent = n;
    expect((await pay('after-0')).headers['idempotent-replayed']).toBe('true');
    expect(spans.getFinishedSpans().some((s) => s.name === 'idempotency.redis.lookup')).toBe(true);
    await reader.forceFlush();
    const claims = exporter.getMetrics().flatMap((r) => r.scopeMetrics).flatMap((s) => s.metrics)
      .filter((m) => m.descriptor.name === 'idempotency.claims').flatMap((m) => m.dataPoints as Array<{ attributes: Record<string, unknown>; value: number }>);
    const count = (outcome: string) => claims.filter((p) => p.attributes.face === 'http' && p.attributes.outcome === outcome)
      .reduce((sum, p) => sum + p.value, 0);
    expect(count('replay')).toBe(1);
    // Only the claims after activation are counted (at least the one traced, at most every key sent since).
    expect(count('acquired')).toBeGreaterThanOrEqual(1);
    expect(count('acquired')).toBeLessThanOrEqual(sent);
  });
});
