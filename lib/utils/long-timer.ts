/**
 * The longest delay Node's timers take (2^31-1 ms, about 24.8 days). A longer one is not an error in Node: it
 * fires after 1 ms with a TimeoutOverflowWarning. Every duration that becomes a timer goes through this file.
 */
export const MAX_TIMER_MS = 2_147_483_647;

/** A pending long timer; `clear()` cancels it (safe to call twice). */
export interface LongTimer {
  clear(): void;
}

/** Options of the long timers. */
export interface LongTimerOptions {
  /** Do not keep the process alive for this timer. Default false. */
  unref?: boolean;
}

/** `setTimeout` for any delay: a delay beyond {@link MAX_TIMER_MS} is waited out in slices below it. */
export function setLongTimeout(callback: () => void, delayMs: number, options: LongTimerOptions = {}): LongTimer {
  let remaining = Math.max(0, delayMs);
  let timer: NodeJS.Timeout;
  const arm = (): void => {
    const slice = Math.min(remaining, MAX_TIMER_MS);
    remaining -= slice;
    timer = setTimeout(remaining > 0 ? arm : callback, slice);
    if (options.unref) timer.unref();
  };
  arm();
  return { clear: () => clearTimeout(timer) };
}

/** `setInterval` for any period: each run is scheduled with {@link setLongTimeout}, after the previous one was due. */
export function setLongInterval(callback: () => void, periodMs: number, options: LongTimerOptions = {}): LongTimer {
  let current: LongTimer;
  let cleared = false;
  const tick = (): void => {
    if (cleared) return;
    current = setLongTimeout(tick, periodMs, options);
    callback();
  };
  current = setLongTimeout(tick, periodMs, options);
  return {
    clear: () => {
      cleared = true;
      current.clear();
    },
  };
}

/** Resolves after `delayMs` (any length), or at once when `wake` is called first. */
export function sleep(delayMs: number, options: LongTimerOptions = {}): { done: Promise<void>; wake: () => void } {
  let wake!: () => void;
  const done = new Promise<void>((resolve) => {
    const timer = setLongTimeout(resolve, delayMs, options);
    wake = () => {
      timer.clear();
      resolve();
    };
  });
  return { done, wake };
}
