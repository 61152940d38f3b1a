import { CompletedRecord } from '../core/idempotency-record';
import { CacheLookup, IdempotencyCache } from '../storage/idempotency.cache';
import { IdempotencyObserver, StoreName } from './idempotency-observer';
import { observeIdempotencyCache } from './observed-stores';

/** An observer that records when told to, and logs the store calls it was handed. */
class SwitchableObserver extends IdempotencyObserver {
  recording = false;
  readonly calls: string[] = [];
  readonly lookups: string[] = [];
  override isRecording(): boolean {
    return this.recording;
  }
  storeCall<T>(store: StoreName, operation: string, _scope: string | undefined, call: () => Promise<T>): Promise<T> {
    this.calls.push(`${store}.${operation}`);
    return call();
  }
  cacheLookup(result: CacheLookup['kind']): void {
    this.lookups.push(result);
  }
  decide<R extends { kind: string }>(_scope: string, _key: string, decide: () => Promise<R>): Promise<R> {
    return decide();
  }
  workflowRun<T>(_id: string, _name: string | undefined, _trace: unknown, run: () => Promise<T>): Promise<T> {
    return run();
  }
  stepAttempt<T>(_info: unknown, run: () => Promise<T>): Promise<T> {
    return run();
  }
  carrier(): undefined {
    return undefined;
  }
  claimed(): void {}
  released(): void {}
  completionLost(): void {}
  watchBreaker(): void {}
  workflowStarted(): void {}
  workflowFinished(): void {}
  workflowRecovered(): void {}
  stepCheckpointed(): void {}
  watchGauges(): void {}
}

/** A cache whose methods note the `this` they ran with (the store itself, or the proxy around it). */
class ThisNotingCache extends IdempotencyCache {
  readonly seenThis: unknown[] = [];
  lookup(): Promise<CacheLookup> {
    this.seenThis.push(this);
    return Promise.resolve({ kind: 'miss' });
  }
  remember(_scope: string, _key: string, _record: CompletedRecord): Promise<void> {
    this.seenThis.push(this);
    return Promise.resolve();
  }
  forget(): Promise<void> {
    return Promise.resolve();
  }
  touch(): Promise<void> {
    return Promise.resolve();
  }
  helper(): unknown {
    return this;
  }
}

describe('observed stores', () => {
  it('runs every method on the store itself, not on the proxy, whether recording or not', async () => {
    const cache = new ThisNotingCache();
    const observer = new SwitchableObserver();
    const observed = observeIdempotencyCache(cache, observer) as ThisNotingCache;
    expect(observed).not.toBe(cache);

    await observed.lookup();
    expect(observer.calls).toEqual([]);
    const detached = observed.helper;
    expect(detached()).toBe(cache); // bound to the store
    observer.recording = true;
    await observed.lookup();
    expect(observer.calls).toEqual(['redis.lookup']);
    expect(observer.lookups).toEqual(['miss']);
    expect(cache.seenThis).toEqual([cache, cache]);
  });

  it('hands out one bound function per method while not recording', () => {
    const observed = observeIdempotencyCache(new ThisNotingCache(), new SwitchableObserver()) as ThisNotingCache;
    expect(observed.lookup).toBe(observed.lookup);
    expect(observed.constructor).toBe(ThisNotingCache);
    expect(observed).toBeInstanceOf(ThisNotingCache);
  });

  it('returns a method replaced on the instance as it is', async () => {
    const cache = new ThisNotingCache();
    const observer = new SwitchableObserver();
    observer.recording = true;
    const observed = observeIdempotencyCache(cache, observer) as ThisNotingCache;
    const spy = jest.spyOn(observed, 'lookup');
    expect(observed.lookup).toBe(spy);
    await observed.lookup();
    expect(spy).toHaveBeenCalledTimes(1);
    expect(observer.calls).toEqual(['redis.lookup']); // the spy called through to the observed method
    spy.mockRestore();
    expect(Object.prototype.hasOwnProperty.call(cache, 'lookup')).toBe(false);
    await observed.lookup();
    expect(observer.calls).toEqual(['redis.lookup', 'redis.lookup']);
  });
});
