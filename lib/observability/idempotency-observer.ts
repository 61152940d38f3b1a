import type { CacheLookup } from '../storage/idempotency.cache';

/** Which part of the library claimed a key: the HTTP interceptor, the method guard, the inbox, a task, a workflow start. */
export type IdempotencyFace = 'http' | 'method' | 'inbox' | 'task' | 'workflow';

/** How a claim ended, as metrics and spans name it. */
export type ClaimOutcomeName = 'acquired' | 'replay' | 'in_progress' | 'mismatch' | 'store_unavailable';

/** Where a store call went. */
export type StoreName = 'postgres' | 'redis';

/** The data a job carries to continue a trace in another process (W3C trace context fields). */
export type TraceCarrier = Record<string, string>;

/** What a step attempt is, for its span and metrics. */
export interface StepAttemptInfo {
  executionId: string;
  workflowName: string;
  stepName: string;
  position: number;
  attempt: number;
  trace?: TraceCarrier;
}

/**
 * The one hook the library's engine calls to be observed (metrics and traces). The default does nothing;
 * with `@opentelemetry/api` installed, `ActivatingObserver` records through the SDK the app registers (free until it does).
 * Every method must be cheap and must never throw into the engine.
 */
export abstract class IdempotencyObserver {
  /**
   * Whether calls are recorded now; while false the stores are not wrapped (their calls go straight through). An
   * observer may start recording later (the default one, once the app registers an OpenTelemetry provider).
   */
  isRecording(): boolean {
    return true;
  }
  /** Wraps one claim decision (`begin`/`beginOrWait`): counts its outcome by face and traces it. */
  abstract decide<R extends { kind: string; takenOver?: boolean }>(scope: string, key: string, decide: () => Promise<R>): Promise<R>;
  /** A decision made outside the key engine (inbox: processed or duplicate; workflow starts). */
  abstract claimed(face: IdempotencyFace, outcome: ClaimOutcomeName): void;
  /** Wraps one call to Postgres or Redis: latency histogram and span. */
  abstract storeCall<T>(store: StoreName, operation: string, scope: string | undefined, call: () => Promise<T>): Promise<T>;
  /** A claim was released after a failure. */
  abstract released(scope: string): void;
  /** A completion found its claim taken over by a newer one: its result was not stored. */
  abstract completionLost(scope: string): void;
  /** What a cache lookup answered. */
  abstract cacheLookup(result: CacheLookup['kind']): void;
  /** Registers a circuit breaker whose state is reported (`isOpen`). */
  abstract watchBreaker(name: string, breaker: { readonly isOpen: boolean }): void;
  /** A new workflow execution was stored. */
  abstract workflowStarted(workflowName: string): void;
  /** An execution reached a final status. */
  abstract workflowFinished(status: string): void;
  /** An interrupted execution was counted as a recovery. */
  abstract workflowRecovered(): void;
  /** A step's outcome was checkpointed after `attempts` attempts. */
  abstract stepCheckpointed(stepName: string, status: string, attempts: number): void;
  /** Wraps one workflow run: a span in the execution's trace (one trace per execution, across processes). */
  abstract workflowRun<T>(executionId: string, workflowName: string | undefined, trace: TraceCarrier | undefined, run: () => Promise<T>): Promise<T>;
  /** Wraps one step attempt: its span (child of the run that called it) and its duration. */
  abstract stepAttempt<T>(info: StepAttemptInfo, run: () => Promise<T>): Promise<T>;
  /** The current trace context, to put in a job's data; undefined when there is none. */
  abstract carrier(): TraceCarrier | undefined;
  /** Registers an asynchronous source of gauges (outbox counts, execution counts) read at each collection. */
  abstract watchGauges(source: GaugeSource): void;
}

/** Gauges read at each metrics collection: name (without the `idempotency.` prefix) → value, per attribute set. */
export type GaugeSource = () => Promise<Array<{ name: string; value: number; attributes?: Record<string, string> }>>;

/** The observer when observability is off or `@opentelemetry/api` is not installed: calls through, records nothing. */
export class NoopObserver extends IdempotencyObserver {
  override isRecording(): boolean {
    return false;
  }
  decide<R extends { kind: string }>(_scope: string, _key: string, decide: () => Promise<R>): Promise<R> {
    return decide();
  }
  claimed(): void {}
  storeCall<T>(_store: StoreName, _operation: string, _scope: string | undefined, call: () => Promise<T>): Promise<T> {
    return call();
  }
  released(): void {}
  completionLost(): void {}
  cacheLookup(): void {}
  watchBreaker(): void {}
  workflowStarted(): void {}
  workflowFinished(): void {}
  workflowRecovered(): void {}
  stepCheckpointed(): void {}
  workflowRun<T>(_executionId: string, _name: string | undefined, _trace: TraceCarrier | undefined, run: () => Promise<T>): Promise<T> {
    return run();
  }
  stepAttempt<T>(_info: StepAttemptInfo, run: () => Promise<T>): Promise<T> {
    return run();
  }
  carrier(): TraceCarrier | undefined {
    return undefined;
  }
  watchGauges(): void {}
}

/** The scope's face: scopes are prefixed by the face that claims them (`http:`, `method:`, …). */
export function faceOf(scope: string): IdempotencyFace {
  const prefix = scope.slice(0, scope.indexOf(':'));
  return prefix === 'http' || prefix === 'method' || prefix === 'inbox' || prefix === 'task' || prefix === 'workflow' ? prefix : 'method';
}
