import { createHash } from 'node:crypto';
import { canonicalJson } from '../utils/canonical-json';

/**
 * @internal Hash of a step call's arguments in canonical JSON (keys sorted, array order kept): stored with the
 * checkpoint and compared on replay. Throws `NotSerializableError` for arguments that have no JSON form.
 */
export function stepArgsHash(args: readonly unknown[]): string {
  return createHash('sha256').update(canonicalJson(args)).digest('hex').slice(0, 32);
}
