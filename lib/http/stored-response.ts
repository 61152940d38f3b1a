import { HttpException, StreamableFile } from '@nestjs/common';
import { Readable } from 'node:stream';

/** Headers never stored or replayed, whatever the configuration says. */
const NEVER_REPLAYED = new Set([
  'set-cookie', 'connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer',
  'transfer-encoding', 'upgrade', 'content-length', 'date',
]);

/** Headers stored by default. */
export const DEFAULT_REPLAY_HEADERS = ['Content-Type', 'Location', 'ETag'];

/** A response as stored in the record: the body is kept as the exact JSON text or string that was sent. */
export interface StoredResponse {
  status: number;
  headers: Record<string, string | string[]>;
  /** `j` JSON text of the handler's value, `s` a string body, `e` undefined, `n` null, `x` an HttpException's body (JSON text). */
  body: { t: 'j' | 's' | 'x'; v: string } | { t: 'e' | 'n' };
}

/** The response object of Express or Fastify, as far as the interceptor needs it. */
export interface ResponseLike {
  statusCode: number;
  getHeader(name: string): number | string | string[] | undefined;
  headersSent?: boolean;
  sent?: boolean;
}

/** A handler value that cannot be stored and replayed: streams, files, raw bytes, or a response already sent. */
export function isUnstorable(value: unknown, response: ResponseLike): boolean {
  if (response.headersSent === true || response.sent === true) return true;
  if (value instanceof StreamableFile || value instanceof Readable || Buffer.isBuffer(value) || value instanceof Uint8Array) return true;
  return typeof value === 'object' && value !== null && typeof (value as { pipe?: unknown }).pipe === 'function';
}

/** The allow-listed response headers present now; never Set-Cookie or hop-by-hop headers. */
export function pickHeaders(response: ResponseLike, names: readonly string[]): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {};
  for (const name of names) {
    if (NEVER_REPLAYED.has(name.toLowerCase())) continue;
    const value = response.getHeader(name);
    if (value !== undefined) headers[name] = typeof value === 'number' ? String(value) : value;
  }
  return headers;
}

/** Captures a successful handler value the way Express and Fastify will serialize it. */
export function storeBody(value: unknown): StoredResponse['body'] {
  if (value === undefined) return { t: 'e' };
  if (value === null) return { t: 'n' };
  if (typeof value === 'string') return { t: 's', v: value };
  return { t: 'j', v: JSON.stringify(value) };
}

/** The body Nest's exception filter sends for an HttpException, kept as JSON text. */
export function storeExceptionBody(exception: HttpException): StoredResponse['body'] {
  const response = exception.getResponse();
  const body = typeof response === 'object' ? response : { statusCode: exception.getStatus(), message: response };
  return { t: 'x', v: JSON.stringify(body) };
}
