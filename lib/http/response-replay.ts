import type { ServerResponse } from 'node:http';
import { callbackOf, copyHead, patchResponse, sendInstead } from './raw-response';
import type { ResponseReplacement } from './stored-response';

/**
 * Makes this response go out as `replacement` whatever the rest of the pipeline sends: outer interceptors,
 * serializers and the adapter run as usual, and at the wire their status, body and body headers are replaced
 * by the stored ones. Headers they set that do not describe the body (CORS, request ids) stay.
 */
export function replayOnto(raw: ServerResponse, replacement: ResponseReplacement): void {
  let head: unknown[] | undefined;
  const original = patchResponse(raw, {
    writeHead: (...args) => {
      head ??= copyHead(args);
      return raw;
    },
    write: (...args) => {
      callbackOf(args)?.();
      return true;
    },
    end: (...args) => {
      original.restore();
      sendInstead(raw, original, head, replacement, callbackOf(args));
      return raw;
    },
  });
}
