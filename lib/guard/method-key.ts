import { KeyDerivationError } from '../errors/key-derivation.error';
import { fingerprint } from '../core/fingerprint';
import { canonicalJson, NotSerializableError } from '../utils/canonical-json';

/** The default key of a guarded method: its stable name and a hash of its arguments in canonical JSON. */
export function defaultMethodKey(methodName: string, args: readonly unknown[]): string {
  let json: string;
  try {
    json = canonicalJson(args);
  } catch (err) {
    if (err instanceof NotSerializableError) throw new KeyDerivationError(methodName, err.message);
    throw err;
  }
  return `${methodName}:${fingerprint([json])}`;
}

/** Runs a user key function and checks that it gave a usable key. */
export function customMethodKey(methodName: string, keyFn: (...args: unknown[]) => unknown, args: readonly unknown[]): string {
  const key = keyFn(...args);
  if (typeof key !== 'string' || key.length === 0) {
    throw new KeyDerivationError(methodName, `the key function returned ${JSON.stringify(key)}, not a non-empty string`);
  }
  return key;
}
