import { SetMetadata } from '@nestjs/common';
import { IdempotencyConfigError } from '../errors/idempotency-config.error';
import { IDEMPOTENT_METHOD_METADATA } from '../idempotency.constants';
import type { RunOptions } from '../interfaces/run-options.interface';
import { parseDuration } from '../utils/duration';
import { transactionOptionProblems } from '../transaction/transaction-options';
import { decoratedName } from '../utils/decorated-name';
import { KeyTracker } from '../utils/known-keys';
import { NAMESPACE_SEPARATOR } from './method-key';

/** Options of `@IdempotentMethod()`. */
export interface IdempotentMethodOptions extends Omit<RunOptions, 'fingerprint'> {
  /** The key from the call's arguments. Default: the method's stable name plus a hash of its arguments in canonical JSON. */
  key?: (...args: any[]) => string; // eslint-disable-line @typescript-eslint/no-explicit-any
  /**
   * Keys are stored as `<namespace>:<key>`. Default: the method's `Class.method`, so two methods whose key
   * functions return the same value never see each other's results. Give several methods one namespace to
   * make them share keys on purpose (a call to one then counts as a call to the others). No `:` inside.
   */
  namespace?: string;
}

const ON_DUPLICATE = ['return', 'raise', 'wait'];
const ON_FAILURE = ['unlock', 'lock'];

/**
 * Makes a provider method run at most once per key (at least once across crashes): duplicates get the
 * stored result (or a DuplicateExecutionError, or wait), and a failure releases the key by default.
 * The method becomes async. Invalid options fail when the class is loaded. With `transaction: true` the method
 * runs in a transaction of the library (`currentTransaction()`) that also stores its result: its database
 * writes then happen exactly once.
 */
export function IdempotentMethod(options: IdempotentMethodOptions = {}): MethodDecorator {
  const problems: string[] = [];
  const given = options;
  const keys = new KeyTracker();
  options = keys.track('', options);
  for (const name of ['ttl', 'lockTimeout', 'waitTimeout'] as const) {
    const value = options[name];
    if (value === undefined) continue;
    const parsed = parseDuration(value);
    if (typeof parsed !== 'number') problems.push(`${name}: ${parsed.error}`);
    else if (parsed <= 0) problems.push(`${name}: must be greater than zero`);
  }
  if (options.onDuplicate !== undefined && !ON_DUPLICATE.includes(options.onDuplicate)) {
    problems.push(`onDuplicate: expected one of ${ON_DUPLICATE.join(', ')}, got ${JSON.stringify(options.onDuplicate)}`);
  }
  if (options.onFailure !== undefined && !ON_FAILURE.includes(options.onFailure)) {
    problems.push(`onFailure: expected one of ${ON_FAILURE.join(', ')}, got ${JSON.stringify(options.onFailure)}`);
  }
  if (options.key !== undefined && typeof options.key !== 'function') problems.push('key: expected a function (...args) => string');
  if (options.namespace !== undefined && (typeof options.namespace !== 'string' || options.namespace.length === 0 || options.namespace.includes(NAMESPACE_SEPARATOR))) {
    problems.push(`namespace: expected a non-empty name without "${NAMESPACE_SEPARATOR}" (it separates the namespace from the key), got ${JSON.stringify(options.namespace)}`);
  }
  problems.push(...transactionOptionProblems(options));
  if (options.scope !== undefined && (typeof options.scope !== 'string' || options.scope.length === 0)) problems.push('scope: expected a non-empty string');
  for (const unknown of keys.unknownKeys()) problems.push(`${unknown.option}: ${unknown.message}`);
  const setMetadata = SetMetadata(IDEMPOTENT_METHOD_METADATA, given);
  // Reported where it is applied, so that an error names the class and method.
  return <T>(target: object, key: string | symbol, descriptor: TypedPropertyDescriptor<T>) => {
    if (problems.length > 0) throw new IdempotencyConfigError(problems.map((p) => `@IdempotentMethod() on ${decoratedName(target, key)}: ${p}`));
    return setMetadata(target, key, descriptor);
  };
}
