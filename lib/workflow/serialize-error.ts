import type { StoredError } from '../errors/workflow-failed.error';

const MAX_STACK = 4000;

/** The JSON form of a thrown value, as stored in a checkpoint or an execution. */
export function serializeError(err: unknown): StoredError {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return {
      name: err.name,
      message: err.message,
      ...(typeof code === 'string' || typeof code === 'number' ? { code: String(code) } : {}),
      ...(err.stack ? { stack: err.stack.slice(0, MAX_STACK) } : {}),
    };
  }
  return { name: 'Error', message: typeof err === 'string' ? err : JSON.stringify(err) ?? String(err) };
}
