import { StreamableFile } from '@nestjs/common';
import { isUtf8 } from 'node:buffer';
import type { OutgoingHttpHeaders } from 'node:http';

/** Headers never stored or replayed, whatever the configuration says (`http.replayHeaders` naming one is refused). */
export const NEVER_REPLAYED: ReadonlySet<string> = new Set([
  'set-cookie', 'connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer',
  'transfer-encoding', 'upgrade', 'content-length', 'date',
]);

/** Headers stored by default. */
export const DEFAULT_REPLAY_HEADERS = ['Content-Type', 'Location', 'ETag'];

/** Stored with the body whenever present: the bytes mean nothing without it. */
const BODY_ENCODING_HEADER = 'Content-Encoding';

/**
 * A response as stored in the record: the status, allow-listed headers and the exact body bytes the client
 * received (`wire: true`). Records written before wire capture have no `wire` and kept the handler's value.
 */
export interface StoredResponse {
  status: number;
  headers: Record<string, string | string[]>;
  /** `s` the bytes as UTF-8 text, `b` base64, `e` no body. Older records: `j`/`x` JSON text, `n` null. */
  body: { t: 's' | 'b' | 'j' | 'x'; v: string } | { t: 'e' | 'n' };
  wire?: true;
}

/** A whole response as it goes on the wire: status, headers (lower-case names) and body bytes. */
export interface WireResponse {
  status: number;
  headers: OutgoingHttpHeaders;
  body: Buffer;
}

/** What the interceptor sends in place of a response: status, headers to set, body bytes. */
export interface ResponseReplacement {
  status: number;
  headers: Record<string, string | string[]>;
  body: Buffer;
}

/** The response object of Express or Fastify, as far as the interceptor needs it. */
export interface ResponseLike {
  statusCode: number;
  getHeader(name: string): number | string | string[] | undefined;
}

/**
 * A handler value that the adapters send in pieces or cannot send as one body: Node and web streams, a web
 * `Response`, files, async iterables, bare ArrayBuffers. Such responses are sent as they are and not stored.
 * Buffers and other ArrayBuffer views go out as one body and are stored as bytes like any other.
 */
export function isStreamingValue(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (value instanceof StreamableFile || value instanceof ArrayBuffer) return true;
  if (typeof SharedArrayBuffer !== 'undefined' && value instanceof SharedArrayBuffer) return true;
  if (ArrayBuffer.isView(value)) return false;
  const candidate = value as { pipe?: unknown; getReader?: unknown; [Symbol.asyncIterator]?: unknown };
  if (typeof candidate.pipe === 'function' || typeof candidate.getReader === 'function') return true;
  if (typeof candidate[Symbol.asyncIterator] === 'function') return true;
  return Object.prototype.toString.call(value) === '[object Response]';
}

/** Builds the record of a response sent in one piece: its status, allow-listed headers and exact bytes. */
export function toStoredResponse(sent: WireResponse, replayHeaders: readonly string[]): StoredResponse {
  const headers: Record<string, string | string[]> = {};
  for (const name of [...replayHeaders, BODY_ENCODING_HEADER]) {
    const lower = name.toLowerCase();
    if (NEVER_REPLAYED.has(lower)) continue;
    const value = sent.headers[lower];
    if (value !== undefined) headers[name] = typeof value === 'number' ? String(value) : value;
  }
  return { status: sent.status, headers, body: encodeBody(sent.body), wire: true };
}

/** The status, headers and bytes to send for a stored record (older records are sent as their adapter sent them). */
export function toReplacement(stored: StoredResponse): ResponseReplacement {
  const headers = { ...stored.headers };
  const body = stored.body;
  if (!stored.wire && (body.t === 'j' || body.t === 'x') && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) {
    headers['Content-Type'] = 'application/json; charset=utf-8';
  }
  return { status: stored.status, headers, body: decodeBody(body) };
}

/** Text when the bytes are UTF-8 without NUL (jsonb refuses `\u0000`), base64 otherwise. */
function encodeBody(bytes: Buffer): StoredResponse['body'] {
  if (bytes.length === 0) return { t: 'e' };
  if (isUtf8(bytes) && !bytes.includes(0)) return { t: 's', v: bytes.toString('utf8') };
  return { t: 'b', v: bytes.toString('base64') };
}

function decodeBody(body: StoredResponse['body']): Buffer {
  switch (body.t) {
    case 'e':
    case 'n':
      return Buffer.alloc(0);
    case 'b':
      return Buffer.from(body.v, 'base64');
    default:
      return Buffer.from(body.v, 'utf8');
  }
}
