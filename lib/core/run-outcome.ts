import { canonicalJson, NotSerializableError } from '../utils/canonical-json';

/** How a guarded call's outcome is stored. */
export type RunOutcome =
  | { ok: true; value?: unknown }
  | { ok: true; notStored: true }
  | { ok: false; error: { name: string; message: string } };

/** The stored form of a successful result; values with no JSON form are flagged rather than stored half-way. */
export function successOutcome(value: unknown): RunOutcome {
  if (value === undefined) return { ok: true };
  try {
    return { ok: true, value: JSON.parse(canonicalJson(value)) as unknown };
  } catch (err) {
    if (err instanceof NotSerializableError) return { ok: true, notStored: true };
    throw err;
  }
}

/** The stored form of a failure: its name and message (stack traces stay out of the database). */
export function failureOutcome(error: unknown): RunOutcome {
  const name = error instanceof Error ? error.name : 'Error';
  const message = error instanceof Error ? error.message : String(error);
  return { ok: false, error: { name, message } };
}
