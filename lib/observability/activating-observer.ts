import type { Logger } from '@nestjs/common';
import type { CacheLookup } from '../storage/idempotency.cache';
import type { Peers } from '../utils/optional-peer';
import {
  ClaimOutcomeName, GaugeSource, IdempotencyFace, IdempotencyObserver, NoopObserver, StepAttemptInfo, StoreName, TraceCarrier,
} from './idempotency-observer';
import type { ResolvedObservabilityOptions } from './observability-options';
import { OpenTelemetryObserver } from './opentelemetry-observer';

type Api = Peers['@opentelemetry/api'];

/** How often, at most, an idle observer looks again for a MeterProvider or TracerProvider. */
const RECHECK_MS = 1000;
const SCOPE_NAME = 'nestjs-idempotency';
const NOOP = new NoopObserver();

/**
 * Whether the app registered an OpenTelemetry SDK the library would record into: a global MeterProvider (the API
 * hands out its no-op meter otherwise), or, with traces on, a TracerProvider behind the API's proxy.
 */
export function sdkRegistered(api: Api, traces: boolean): boolean {
  if (api.metrics.getMeter(SCOPE_NAME) !== api.createNoopMeter()) return true;
  if (!traces) return false;
  const provider = api.trace.getTracerProvider();
  return !(provider instanceof api.ProxyTracerProvider) || provider.getDelegateTracer(SCOPE_NAME) !== undefined;
}

/**
 * The observer the module binds when `@opentelemetry/api` is installed: free until the app registers a MeterProvider
 * or TracerProvider — it calls straight through and the stores are not wrapped ({@link isRecording} false) — then an
 * {@link OpenTelemetryObserver}. It looks for a provider when created and then at most once a second, so a provider
 * registered after `NestFactory.create` (before or after `listen`) is picked up within a second.
 */
export class ActivatingObserver extends IdempotencyObserver {
  private delegate: IdempotencyObserver = NOOP;
  private recording = false;
  private nextCheck = 0;
  private readonly breakers: Array<[string, { readonly isOpen: boolean }]> = [];
  private readonly gaugeSources: GaugeSource[] = [];

  constructor(
    private readonly api: Api,
    private readonly options: ResolvedObservabilityOptions,
    private readonly logger: Logger,
  ) {
    super();
    if (!this.isRecording()) {
      logger.debug('observability: no OpenTelemetry MeterProvider or TracerProvider registered yet; nothing is recorded or wrapped until one is (looked for at most once a second)');
    }
  }

  /** True once a provider is registered; while false, every call goes straight through. */
  override isRecording(): boolean {
    if (this.recording) return true;
    const now = Date.now();
    if (now < this.nextCheck) return false;
    this.nextCheck = now + RECHECK_MS;
    if (!sdkRegistered(this.api, this.options.traces)) return false;
    const observer = new OpenTelemetryObserver(this.api, this.options);
    for (const [name, breaker] of this.breakers) observer.watchBreaker(name, breaker);
    for (const source of this.gaugeSources) observer.watchGauges(source);
    this.delegate = observer;
    this.recording = true;
    this.logger.debug(`observability: recording metrics${this.options.traces ? ' and traces' : ''} through the registered OpenTelemetry providers`);
    return true;
  }

  private get current(): IdempotencyObserver {
    return this.recording || this.isRecording() ? this.delegate : NOOP;
  }

  decide<R extends { kind: string; takenOver?: boolean }>(scope: string, key: string, decide: () => Promise<R>): Promise<R> {
    return this.current.decide(scope, key, decide);
  }

  claimed(face: IdempotencyFace, outcome: ClaimOutcomeName): void {
    this.current.claimed(face, outcome);
  }

  storeCall<T>(store: StoreName, operation: string, scope: string | undefined, call: () => Promise<T>): Promise<T> {
    return this.current.storeCall(store, operation, scope, call);
  }

  released(scope: string): void {
    this.current.released(scope);
  }

  completionLost(scope: string): void {
    this.current.completionLost(scope);
  }

  cacheLookup(result: CacheLookup['kind']): void {
    this.current.cacheLookup(result);
  }

  watchBreaker(name: string, breaker: { readonly isOpen: boolean }): void {
    this.breakers.push([name, breaker]);
    if (this.recording) this.delegate.watchBreaker(name, breaker);
  }

  watchGauges(source: GaugeSource): void {
    this.gaugeSources.push(source);
    if (this.recording) this.delegate.watchGauges(source);
  }

  workflowStarted(workflowName: string): void {
    this.current.workflowStarted(workflowName);
  }

  workflowFinished(status: string): void {
    this.current.workflowFinished(status);
  }

  workflowRecovered(): void {
    this.current.workflowRecovered();
  }

  stepCheckpointed(stepName: string, status: string, attempts: number): void {
    this.current.stepCheckpointed(stepName, status, attempts);
  }

  workflowRun<T>(executionId: string, workflowName: string | undefined, trace: TraceCarrier | undefined, run: () => Promise<T>): Promise<T> {
    return this.current.workflowRun(executionId, workflowName, trace, run);
  }

  stepAttempt<T>(info: StepAttemptInfo, run: () => Promise<T>): Promise<T> {
    return this.current.stepAttempt(info, run);
  }

  carrier(): TraceCarrier | undefined {
    return this.current.carrier();
  }
}
