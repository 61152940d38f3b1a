import { Logger } from '@nestjs/common';
import type { Checker } from '../utils/validate-options';

/** The library's log levels, least to most severe; `false` silences the library. */
export type IdempotencyLogLevel = 'verbose' | 'debug' | 'log' | 'warn' | 'error' | 'fatal';

/** Least to most severe, as Nest orders them. */
export const LOG_LEVELS: readonly IdempotencyLogLevel[] = ['verbose', 'debug', 'log', 'warn', 'error', 'fatal'];

/** The default `logLevel`: everything the library logs except debug and verbose lines. */
export const DEFAULT_LOG_LEVEL: IdempotencyLogLevel = 'log';

/** The stable contexts of the library's lines: keys and HTTP (`Idempotency`), workflows (`Workflows`). */
export type LibraryLogContext = 'Idempotency' | 'Workflows';

/**
 * Lowest severity the library emits, process-wide like Nest's own logger settings (`app.useLogger`): each
 * IdempotencyModule sets it from its `logLevel` when its options are resolved, before any of its providers logs.
 * Infinity: nothing.
 */
let threshold = LOG_LEVELS.indexOf(DEFAULT_LOG_LEVEL);

/** Applies a module's `logLevel` to every line the library logs from now on. */
export function useLibraryLogLevel(level: IdempotencyLogLevel | false): void {
  threshold = level === false ? Infinity : LOG_LEVELS.indexOf(level);
}

const emits = (level: IdempotencyLogLevel): boolean => LOG_LEVELS.indexOf(level) >= threshold;

/**
 * Nest's `Logger` for the library's own lines: they go to whatever logger the app set (`NestFactory.create(...,
 * { logger })`, `app.useLogger`), under a stable context, and lines below the module's `logLevel` are dropped here.
 * The app's own lines are not affected.
 */
export class LibraryLogger extends Logger {
  constructor(context: LibraryLogContext) {
    super(context);
  }

  override error(message: unknown, ...rest: unknown[]): void {
    if (emits('error')) super.error(message, ...rest);
  }

  override warn(message: unknown, ...rest: unknown[]): void {
    if (emits('warn')) super.warn(message, ...rest);
  }

  override log(message: unknown, ...rest: unknown[]): void {
    if (emits('log')) super.log(message, ...rest);
  }

  override debug(message: unknown, ...rest: unknown[]): void {
    if (emits('debug')) super.debug(message, ...rest);
  }

  override verbose(message: unknown, ...rest: unknown[]): void {
    if (emits('verbose')) super.verbose(message, ...rest);
  }

  override fatal(message: unknown, ...rest: unknown[]): void {
    if (emits('fatal')) super.fatal(message, ...rest);
  }
}

/** Reads the `logLevel` module option: one of {@link LOG_LEVELS}, or false. */
export function resolveLogLevel(c: Checker, given: unknown): IdempotencyLogLevel | false {
  if (given === undefined) return DEFAULT_LOG_LEVEL;
  if (given === false || LOG_LEVELS.includes(given as IdempotencyLogLevel)) return given as IdempotencyLogLevel | false;
  c.fail('logLevel', `expected one of ${LOG_LEVELS.map((l) => `'${l}'`).join(', ')} (the least severe line the library logs) or false (none), got ${JSON.stringify(given)}`);
  return DEFAULT_LOG_LEVEL;
}
