import { MAX_TIMER_MS, setLongInterval, setLongTimeout, sleep } from './long-timer';

const DAY = 86_400_000;

describe('long timers', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('setLongTimeout waits a 25-day delay out in slices, and fires once at the end', () => {
    const fired = jest.fn();
    setLongTimeout(fired, 25 * DAY);
    jest.advanceTimersByTime(MAX_TIMER_MS);
    expect(fired).not.toHaveBeenCalled();
    jest.advanceTimersByTime(25 * DAY - MAX_TIMER_MS - 1);
    expect(fired).not.toHaveBeenCalled();
    jest.advanceTimersByTime(1);
    expect(fired).toHaveBeenCalledTimes(1);
  });

  it('every timer Node is asked for stays within its 32-bit limit', () => {
    const spy = jest.spyOn(global, 'setTimeout');
    setLongTimeout(() => undefined, 1000 * DAY);
    jest.advanceTimersByTime(1000 * DAY);
    const delays = spy.mock.calls.map((call) => call[1] ?? 0);
    expect(delays.length).toBeGreaterThan(1);
    for (const d of delays) expect(d).toBeLessThanOrEqual(MAX_TIMER_MS);
    spy.mockRestore();
  });

  it('clear() stops a long timeout in any slice', () => {
    const fired = jest.fn();
    const timer = setLongTimeout(fired, 60 * DAY);
    jest.advanceTimersByTime(30 * DAY);
    timer.clear();
    jest.advanceTimersByTime(60 * DAY);
    expect(fired).not.toHaveBeenCalled();
  });

  it('setLongInterval runs once per 25-day period and stops when cleared', () => {
    const fired = jest.fn();
    const timer = setLongInterval(fired, 25 * DAY);
    jest.advanceTimersByTime(25 * DAY - 1);
    expect(fired).toHaveBeenCalledTimes(0);
    jest.advanceTimersByTime(1);
    expect(fired).toHaveBeenCalledTimes(1);
    jest.advanceTimersByTime(50 * DAY);
    expect(fired).toHaveBeenCalledTimes(3);
    timer.clear();
    jest.advanceTimersByTime(100 * DAY);
    expect(fired).toHaveBeenCalledTimes(3);
  });

  it('sleep resolves after its delay, or at once when woken', async () => {
    const long = sleep(30 * DAY);
    let resolved = false;
    void long.done.then(() => (resolved = true));
    jest.advanceTimersByTime(29 * DAY);
    await Promise.resolve();
    expect(resolved).toBe(false);
    long.wake();
    await long.done;
    expect(resolved).toBe(true);
  });
});
