import type { Logger } from '@nestjs/common';
import { CircuitBreaker } from './circuit-breaker';

function fakeLogger() {
  return { warn: jest.fn(), log: jest.fn(), error: jest.fn() };
}

const failing = () => Promise.reject(new Error('down'));

describe('CircuitBreaker', () => {
  let logger: ReturnType<typeof fakeLogger>;
  let breaker: CircuitBreaker;

  beforeEach(() => {
    jest.useFakeTimers({ now: new Date('2024-01-01T00:00:00Z') });
    logger = fakeLogger();
    breaker = new CircuitBreaker('Redis', { failureThreshold: 3, resetAfterMs: 1000, timeoutMs: 100 }, logger as unknown as Logger);
  });

  afterEach(() => {
    jest.useRealTimers();
  });

  it('passes results through while closed', async () => {
    await expect(breaker.run(() => Promise.resolve('value'), 'fallback')).resolves.toBe('value');
    expect(breaker.isOpen).toBe(false);
  });

  it('returns the fallback when a call fails, and stays closed below the threshold', async () => {
    await expect(breaker.run(failing, 'fallback')).resolves.toBe('fallback');
    await expect(breaker.run(failing, 'fallback')).resolves.toBe('fallback');
    expect(breaker.isOpen).toBe(false);
    const call = jest.fn(() => Promise.resolve('v'));
    await expect(breaker.run(call, 'fallback')).resolves.toBe('v');
    expect(call).toHaveBeenCalledTimes(1);
  });

  it('counts only consecutive failures', async () => {
    await breaker.run(failing, null);
    await breaker.run(failing, null);
    await breaker.run(() => Promise.resolve(1), null);
    await breaker.run(failing, null);
    await breaker.run(failing, null);
    expect(breaker.isOpen).toBe(false);
    await breaker.run(failing, null);
    expect(breaker.isOpen).toBe(true);
  });

  it('opens after the threshold and logs one warning', async () => {
    for (let i = 0; i < 3; i++) await breaker.run(failing, null);
    expect(breaker.isOpen).toBe(true);
    expect(logger.warn).toHaveBeenCalledTimes(1);
    expect(logger.warn.mock.calls[0][0]).toContain('Redis');
  });

  it('skips calls while open', async () => {
    for (let i = 0; i < 3; i++) await breaker.run(failing, null);
    const call = jest.fn(() => Promise.resolve('v'));
    jest.advanceTimersByTime(999);
    await expect(breaker.run(call, 'fallback')).resolves.toBe('fallback');
    expect(call).not.toHaveBeenCalled();
  });

  it('counts a call slower than the timeout as a failure', async () => {
    const never = () => new Promise<string>(() => undefined);
    for (let i = 0; i < 3; i++) {
      const pending = breaker.run(never, 'fallback');
      await jest.advanceTimersByTimeAsync(100);
      await expect(pending).resolves.toBe('fallback');
    }
    expect(breaker.isOpen).toBe(true);
  });

  it('lets a single probe through after resetAfter and closes when it succeeds', async () => {
    for (let i = 0; i < 3; i++) await breaker.run(failing, null);
    jest.advanceTimersByTime(1000);
    let resolveProbe!: (v: string) => void;
    const probe = jest.fn(() => new Promise<string>((resolve) => { resolveProbe = resolve; }));
    const other = jest.fn(() => Promise.resolve('other'));
    const probing = breaker.run(probe, 'fallback');
    // While the probe is in flight every other call is skipped.
    await expect(breaker.run(other, 'fallback')).resolves.toBe('fallback');
    expect(other).not.toHaveBeenCalled();
    expect(breaker.isOpen).toBe(true);
    resolveProbe('probed');
    await expect(probing).resolves.toBe('probed');
    expect(probe).toHaveBeenCalledTimes(1);
    expect(breaker.isOpen).toBe(false);
    expect(logger.log).toHaveBeenCalledTimes(1);
    await expect(breaker.run(other, 'fallback')).resolves.toBe('other');
    expect(other).toHaveBeenCalledTimes(1);
  });

  it('re-opens for another resetAfter when the probe fails', async () => {
    for (let i = 0; i < 3; i++) await breaker.run(failing, null);
    jest.advanceTimersByTime(1000);
    const probe = jest.fn(failing);
    await expect(breaker.run(probe, 'fallback')).resolves.toBe('fallback');
    expect(probe).toHaveBeenCalledTimes(1);
    expect(breaker.isOpen).toBe(true);
    const skipped = jest.fn(() => Promise.resolve('v'));
    jest.advanceTimersByTime(999);
    await expect(breaker.run(skipped, 'fallback')).resolves.toBe('fallback');
    expect(skipped).not.toHaveBeenCalled();
    jest.advanceTimersByTime(1);
    await expect(breaker.run(skipped, 'fallback')).resolves.toBe('v');
    expect(breaker.isOpen).toBe(false);
    // The warning is logged when the breaker first opens, not on every failed probe.
    expect(logger.warn).toHaveBeenCalledTimes(1);
  });

  it('a probe that times out re-opens the breaker', async () => {
    for (let i = 0; i < 3; i++) await breaker.run(failing, null);
    jest.advanceTimersByTime(1000);
    const pending = breaker.run(() => new Promise<string>(() => undefined), 'fallback');
    await jest.advanceTimersByTimeAsync(100);
    await expect(pending).resolves.toBe('fallback');
    expect(breaker.isOpen).toBe(true);
  });

  it('a failure after closing again needs the full threshold to re-open', async () => {
    for (let i = 0; i < 3; i++) await breaker.run(failing, null);
    jest.advanceTimersByTime(1000);
    await breaker.run(() => Promise.resolve(1), null);
    await breaker.run(failing, null);
    await breaker.run(failing, null);
    expect(breaker.isOpen).toBe(false);
  });

  it('times out overlapping calls each at its own deadline, and never a call that settled', async () => {
    const never = () => new Promise<string>(() => undefined);
    const settled: string[] = [];
    void breaker.run(never, 'first').then((v) => settled.push(v));
    await jest.advanceTimersByTimeAsync(50);
    void breaker.run(never, 'second').then((v) => settled.push(v));
    void breaker.run(() => Promise.resolve('quick'), 'not used').then((v) => settled.push(v));
    await jest.advanceTimersByTimeAsync(0);
    expect(settled).toEqual(['quick']);
    await jest.advanceTimersByTimeAsync(50);
    expect(settled).toEqual(['quick', 'first']);
    await jest.advanceTimersByTimeAsync(49);
    expect(settled).toEqual(['quick', 'first']);
    await jest.advanceTimersByTimeAsync(1);
    expect(settled).toEqual(['quick', 'first', 'second']);
    // Two failures in a row, below the threshold of three: still closed.
    expect(breaker.isOpen).toBe(false);
    expect(jest.getTimerCount()).toBe(0);
  });
});
