import type { CanActivate, Type } from '@nestjs/common';
import type { Checker } from '../utils/validate-options';

/** `console` of the module options: the web console (off by default). */
export interface ConsoleOptions {
  /** Where it is mounted. Default `"/_idempotency"`. */
  path?: string;
  /** A guard class (`CanActivate`, resolved like any provider) every console request must pass. Required unless `allowUnguarded`. */
  guard?: Type<CanActivate>;
  /** Mount it without a guard (local development only: the console cancels workflows and releases keys). Default false. */
  allowUnguarded?: boolean;
}

/** Console settings after validation (internal). */
export interface ResolvedConsoleOptions {
  path: string;
  guard?: Type<CanActivate>;
}

/** Reads `console` through the checker; undefined when the console is off. */
export function resolveConsole(c: Checker, given: unknown): ResolvedConsoleOptions | undefined {
  if (given === undefined || given === false) return undefined;
  if (typeof given !== 'object' || given === null || Array.isArray(given)) {
    c.fail('console', `expected { path?: "/_idempotency", guard: YourGuard } or false, got ${JSON.stringify(given)}`);
    return undefined;
  }
  const o: ConsoleOptions = c.track('console', given);
  const path = o.path ?? '/_idempotency';
  if (typeof path !== 'string' || !/^\/[A-Za-z0-9._~\-/]*[A-Za-z0-9._~-]$/.test(path)) {
    c.fail('console.path', `expected a path like "/_idempotency" (leading slash, no trailing slash), got ${JSON.stringify(path)}`);
  }
  const allowUnguarded = c.boolean('console.allowUnguarded', o.allowUnguarded, false);
  if (o.guard !== undefined && typeof o.guard !== 'function') {
    c.fail('console.guard', 'expected a guard class (implements CanActivate), e.g. guard: AdminGuard');
  } else if (o.guard === undefined && !allowUnguarded) {
    c.fail('console.guard', 'the console cancels workflows and releases keys: give it a guard class (CanActivate), or set console.allowUnguarded: true for local development');
  }
  return { path, guard: o.guard };
}
