import { KeyDerivationError } from '../errors/key-derivation.error';
import { fingerprint } from '../core/fingerprint';
import { canonicalJson, NotSerializableError } from '../utils/canonical-json';

/** Separates a method's key namespace from the key itself; a `namespace` option must not contain it. */
export const NAMESPACE_SEPARATOR = ':';

/** How a guarded method derives its keys. */
export interface MethodKeyRule {
  /** `Class.method`, named in errors. */
  methodName: string;
  /** What keys are prefixed with: `Class.method` unless the `namespace` option names a shared one. */
  namespace: string;
  keyFn?: (...args: unknown[]) => unknown;
}

/**
 * The key of one call: `<namespace>:<key>`, where the key is the user's key function's result, or by default
 * a hash of the arguments in canonical JSON. The namespace keeps two methods that key by the same value apart.
 */
export function methodKey(rule: MethodKeyRule, args: readonly unknown[]): string {
  const key = rule.keyFn ? customKey(rule.methodName, rule.keyFn, args) : argumentsHash(rule.methodName, args);
  return `${rule.namespace}${NAMESPACE_SEPARATOR}${key}`;
}

function argumentsHash(methodName: string, args: readonly unknown[]): string {
  let json: string;
  try {
    json = canonicalJson(args);
  } catch (err) {
    if (err instanceof NotSerializableError) throw new KeyDerivationError(methodName, err.message);
    throw err;
  }
  return fingerprint([json]);
}

/** Runs a user key function and checks that it gave a usable key. */
function customKey(methodName: string, keyFn: (...args: unknown[]) => unknown, args: readonly unknown[]): string {
  const key = keyFn(...args);
  if (typeof key !== 'string' || key.length === 0) {
    throw new KeyDerivationError(methodName, `the key function returned ${JSON.stringify(key)}, not a non-empty string`);
  }
  return key;
}
