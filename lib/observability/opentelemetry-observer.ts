import { createHash } from 'node:crypto';
import type { Attributes, Context, Counter, Histogram, Link, ObservableGauge, Span, SpanContext, Tracer } from '@opentelemetry/api';
import type { CacheLookup } from '../storage/idempotency.cache';
import { StoreUnavailableError } from '../errors/store-unavailable.error';
import type { Peers } from '../utils/optional-peer';
import {
  ClaimOutcomeName, faceOf, GaugeSource, IdempotencyFace, IdempotencyObserver, StepAttemptInfo, StoreName, TraceCarrier,
} from './idempotency-observer';
import type { ResolvedObservabilityOptions } from './observability-options';

type Api = Peers['@opentelemetry/api'];

const SCOPE_NAME = 'nestjs-idempotency';
const SAMPLED = 1;
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** Gauges read from `watchGauges` sources, by name without the `idempotency.` prefix. */
const GAUGES: Record<string, { description: string; unit?: string }> = {
  'outbox.pending': { description: 'Outbox messages waiting for delivery' },
  'outbox.oldest_pending_age': { description: 'Age of the oldest pending outbox message', unit: 's' },
  'outbox.dead': { description: 'Outbox messages given up after their last attempt' },
  'workflow.executions': { description: 'Unfinished workflow executions by status (pending, running, sleeping, waiting, …)' },
};

/**
 * Records the library's metrics and spans through the OpenTelemetry API: whatever MeterProvider and TracerProvider
 * the app registered receive them. Made by ActivatingObserver once a provider is registered (instruments are bound to it then).
 */
export class OpenTelemetryObserver extends IdempotencyObserver {
  private readonly tracer: Tracer;
  private readonly claims: Counter;
  private readonly takeovers: Counter;
  private readonly releases: Counter;
  private readonly lostCompletions: Counter;
  private readonly cacheLookups: Counter;
  private readonly storeDuration: Histogram;
  private readonly workflowStarts: Counter;
  private readonly workflowCompletions: Counter;
  private readonly workflowRecoveries: Counter;
  private readonly stepDuration: Histogram;
  private readonly stepAttempts: Histogram;
  private readonly breakers = new Map<string, { readonly isOpen: boolean }>();
  private readonly gaugeSources: GaugeSource[] = [];
  private readonly lookups = { hit: 0, all: 0 };

  constructor(
    private readonly api: Api,
    private readonly options: ResolvedObservabilityOptions,
  ) {
    super();
    const meter = api.metrics.getMeter(SCOPE_NAME);
    this.tracer = api.trace.getTracer(SCOPE_NAME);
    this.claims = meter.createCounter('idempotency.claims', { description: 'Claim decisions by face and outcome' });
    this.takeovers = meter.createCounter('idempotency.takeovers', { description: 'Claims that took over the expired lease of a holder presumed dead' });
    this.releases = meter.createCounter('idempotency.releases', { description: 'Claims released after a failure (the key can be claimed again)' });
    this.lostCompletions = meter.createCounter('idempotency.completions.lost', { description: 'Completions not stored because a newer claim took the key over' });
    this.cacheLookups = meter.createCounter('idempotency.cache.lookups', { description: 'Redis cache lookups by result (hit, busy, miss)' });
    this.storeDuration = meter.createHistogram('idempotency.store.duration', { description: 'Latency of store calls (Postgres, Redis)', unit: 's' });
    this.workflowStarts = meter.createCounter('idempotency.workflow.starts', { description: 'New workflow executions' });
    this.workflowCompletions = meter.createCounter('idempotency.workflow.completions', { description: 'Executions that reached a final status, by status' });
    this.workflowRecoveries = meter.createCounter('idempotency.workflow.recoveries', { description: 'Interrupted executions taken up again' });
    this.stepDuration = meter.createHistogram('idempotency.workflow.step.duration', { description: 'Duration of step attempts', unit: 's' });
    this.stepAttempts = meter.createHistogram('idempotency.workflow.step.attempts', { description: 'Attempts a checkpointed step took' });
    const breakerGauge = meter.createObservableGauge('idempotency.redis.breaker.open', { description: '1 while the Redis circuit breaker is open (Redis bypassed)' });
    breakerGauge.addCallback((result) => {
      for (const [name, breaker] of this.breakers) result.observe(breaker.isOpen ? 1 : 0, { breaker: name });
    });
    const hitRatio = meter.createObservableGauge('idempotency.cache.hit_ratio', { description: 'Share of cache lookups answered by a cached record since start' });
    hitRatio.addCallback((result) => {
      if (this.lookups.all > 0) result.observe(this.lookups.hit / this.lookups.all);
    });
    const gauges = new Map<string, ObservableGauge>();
    for (const [name, spec] of Object.entries(GAUGES)) gauges.set(name, meter.createObservableGauge(`idempotency.${name}`, spec));
    meter.addBatchObservableCallback(async (result) => {
      const readings = await Promise.all(this.gaugeSources.map((source) => source().catch(() => [])));
      for (const reading of readings.flat()) {
        const gauge = gauges.get(reading.name);
        if (gauge) result.observe(gauge, reading.value, reading.attributes);
      }
    }, [...gauges.values()]);
  }

  async decide<R extends { kind: string; takenOver?: boolean }>(scope: string, key: string, decide: () => Promise<R>): Promise<R> {
    const face = faceOf(scope);
    return this.span('idempotency.claim', { ...this.keyAttributes(scope, key), 'idempotency.face': face }, async (span) => {
      try {
        const result = await decide();
        const outcome = result.kind as ClaimOutcomeName;
        span?.setAttribute('idempotency.outcome', outcome);
        this.claims.add(1, { face, outcome });
        if (result.takenOver) this.takeovers.add(1, { face });
        return result;
      } catch (err) {
        if (err instanceof StoreUnavailableError) {
          span?.setAttribute('idempotency.outcome', 'store_unavailable');
          this.claims.add(1, { face, outcome: 'store_unavailable' });
        }
        throw err;
      }
    });
  }

  claimed(face: IdempotencyFace, outcome: ClaimOutcomeName): void {
    this.claims.add(1, { face, outcome });
  }

  storeCall<T>(store: StoreName, operation: string, scope: string | undefined, call: () => Promise<T>): Promise<T> {
    const attributes: Attributes = { 'idempotency.store': store, 'db.operation.name': operation };
    if (scope !== undefined) attributes['idempotency.scope'] = scope;
    return this.span(`idempotency.${store}.${operation}`, attributes, async () => {
      const started = performance.now();
      let failed = false;
      try {
        return await call();
      } catch (err) {
        failed = true;
        throw err;
      } finally {
        this.storeDuration.record((performance.now() - started) / 1000, { store, operation, error: failed });
      }
    }, this.api.SpanKind.CLIENT);
  }

  released(scope: string): void {
    this.releases.add(1, { face: faceOf(scope) });
  }

  completionLost(scope: string): void {
    this.lostCompletions.add(1, { face: faceOf(scope) });
  }

  cacheLookup(result: CacheLookup['kind']): void {
    this.cacheLookups.add(1, { result });
    this.lookups.all++;
    if (result === 'hit') this.lookups.hit++;
  }

  watchBreaker(name: string, breaker: { readonly isOpen: boolean }): void {
    this.breakers.set(name, breaker);
  }

  watchGauges(source: GaugeSource): void {
    this.gaugeSources.push(source);
  }

  workflowStarted(workflowName: string): void {
    this.workflowStarts.add(1, { workflow: workflowName });
  }

  workflowFinished(status: string): void {
    this.workflowCompletions.add(1, { status });
  }

  workflowRecovered(): void {
    this.workflowRecoveries.add(1);
  }

  stepCheckpointed(stepName: string, status: string, attempts: number): void {
    this.stepAttempts.record(attempts, { step: stepName, status });
  }

  workflowRun<T>(executionId: string, workflowName: string | undefined, trace: TraceCarrier | undefined, run: () => Promise<T>): Promise<T> {
    // One trace per execution: its id is derived from the execution id, so every run (first, recovered, resumed) in
    // every process joins it; the context of whoever started the execution is linked.
    const starter = parseCarrier(trace);
    const links: Link[] = starter ? [{ context: starter }] : [];
    const parent = this.api.trace.setSpanContext(this.api.ROOT_CONTEXT, executionRoot(executionId));
    const attributes: Attributes = { 'idempotency.execution_id': executionId };
    if (workflowName) attributes['idempotency.workflow'] = workflowName;
    return this.span(`idempotency.workflow ${workflowName ?? 'run'}`, attributes, () => run(), this.api.SpanKind.CONSUMER, parent, links);
  }

  stepAttempt<T>(info: StepAttemptInfo, run: () => Promise<T>): Promise<T> {
    const caller = parseCarrier(info.trace);
    const parent = this.api.trace.setSpanContext(this.api.ROOT_CONTEXT, caller?.traceId === executionTraceId(info.executionId) ? caller : executionRoot(info.executionId));
    const attributes: Attributes = {
      'idempotency.execution_id': info.executionId,
      'idempotency.workflow': info.workflowName,
      'idempotency.step': info.stepName,
      'idempotency.step.position': info.position,
      'idempotency.step.attempt': info.attempt,
    };
    return this.span(`idempotency.step ${info.stepName}`, attributes, async (span) => {
      const started = performance.now();
      let outcome = 'retry'; // an attempt throws only to have BullMQ retry it
      try {
        const result = await run();
        outcome = (result as { status?: string } | undefined)?.status ?? 'completed';
        span?.setAttribute('idempotency.outcome', outcome);
        return result;
      } finally {
        this.stepDuration.record((performance.now() - started) / 1000, { step: info.stepName, outcome });
      }
    }, this.api.SpanKind.CONSUMER, parent);
  }

  carrier(): TraceCarrier | undefined {
    const context = this.api.trace.getSpanContext(this.api.context.active());
    if (!context || !this.api.isSpanContextValid(context)) return undefined;
    return { traceparent: `00-${context.traceId}-${context.spanId}-0${context.traceFlags & SAMPLED}` };
  }

  private keyAttributes(scope: string, key: string): Attributes {
    return this.options.recordKeys ? { 'idempotency.scope': scope, 'idempotency.key': key } : { 'idempotency.scope': scope };
  }

  /** Runs `work` in a span when traces are on (ended, with its error recorded); with traces off, just runs it. */
  private async span<T>(
    name: string,
    attributes: Attributes,
    work: (span: Span | undefined) => Promise<T>,
    kind = this.api.SpanKind.INTERNAL,
    parent?: Context,
    links?: Link[],
  ): Promise<T> {
    if (!this.options.traces) return work(undefined);
    const span = this.tracer.startSpan(name, { kind, attributes, links }, parent ?? this.api.context.active());
    try {
      return await this.api.context.with(this.api.trace.setSpan(parent ?? this.api.context.active(), span), () => work(span));
    } catch (err) {
      span.recordException(err as Error);
      span.setStatus({ code: this.api.SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
      throw err;
    } finally {
      span.end();
    }
  }
}

/** A UUID (the execution id) as a 32-hex trace id. */
function executionTraceId(executionId: string): string {
  const hex = executionId.replace(/-/g, '').toLowerCase();
  return /^[0-9a-f]{32}$/.test(hex) && !/^0+$/.test(hex) ? hex : createHash('sha256').update(executionId).digest('hex').slice(0, 32);
}

/** The remote parent every run of an execution hangs under: same trace id everywhere, derived from the execution id. */
function executionRoot(executionId: string): SpanContext {
  const spanId = createHash('sha256').update(`root:${executionId}`).digest('hex').slice(0, 16);
  return { traceId: executionTraceId(executionId), spanId, traceFlags: SAMPLED, isRemote: true };
}

function parseCarrier(carrier: TraceCarrier | undefined): SpanContext | undefined {
  const match = carrier?.traceparent ? TRACEPARENT.exec(carrier.traceparent) : null;
  if (!match) return undefined;
  return { traceId: match[1], spanId: match[2], traceFlags: parseInt(match[3], 16), isRemote: true };
}
