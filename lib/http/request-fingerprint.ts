import { fingerprint } from '../core/fingerprint';
import { BodyNotFingerprintableError } from '../errors/body-not-fingerprintable.error';
import type { IdempotencyRequest } from '../interfaces/idempotency-options.interface';
import { canonicalJson, omissionTree, OmissionTree } from '../utils/canonical-json';
import { hasMultipartParts, multipartPayload } from './multipart-fingerprint';

/**
 * What kind of body a request carried, tagged into the fingerprint so that two kinds never meet:
 * `none` (no body), `data` (a parsed body: JSON, form fields), `text` (a string), `bytes` (a Buffer,
 * e.g. `application/octet-stream` through a raw parser), `multipart` (parsed fields and files).
 */
export type BodyKind = 'none' | 'data' | 'text' | 'bytes' | 'multipart';

const omissions = new WeakMap<readonly string[], OmissionTree>();

/**
 * Fingerprint of method, path with query, the body's kind and media type, and the body: parsed data in
 * canonical JSON (keys sorted, whitespace gone, the named fields left out), text and bytes as they are,
 * multipart fields and file contents. Async only when an uploaded file has to be read from disk.
 * Throws {@link BodyNotFingerprintableError} when the request has a body that nothing has parsed.
 */
export function requestFingerprint(request: IdempotencyRequest, ignoreBodyFields: readonly string[]): string | Promise<string> {
  const method = request.method.toUpperCase();
  const url = request.originalUrl ?? request.url;
  const media = mediaTypeOf(request);
  const body = request.body;
  if (hasMultipartParts(request)) {
    const payload = multipartPayload(request, omitFor(ignoreBodyFields), media);
    return typeof payload === 'string' ? fingerprint([method, url, 'multipart', media, payload]) : payload.then((p) => fingerprint([method, url, 'multipart', media, p]));
  }
  if (body === undefined || body === null) {
    if (bodyIsUnread(request)) {
      throw new BodyNotFingerprintableError(media, `the request body (${media || 'no content type'}) was not parsed before the handler, so it cannot be part of the request fingerprint`);
    }
    return fingerprint([method, url, 'none', '', '']);
  }
  if (Buffer.isBuffer(body)) return fingerprint([method, url, 'bytes', media, body]);
  if (typeof body === 'string') return fingerprint([method, url, 'text', media, body]);
  return fingerprint([method, url, 'data', media, canonicalJson(body, omitFor(ignoreBodyFields))]);
}

/**
 * True when the request announces a body that no parser has read yet (no `body`, no parsed files):
 * a multipart upload before `FileInterceptor`, or a content type without a parser.
 */
export function bodyIsUnread(request: IdempotencyRequest): boolean {
  if ((request.body !== undefined && request.body !== null) || hasMultipartParts(request)) return false;
  const headers = request.headers;
  if (headers['transfer-encoding'] !== undefined) return true;
  const length = Number(headers['content-length'] ?? 0);
  return Number.isFinite(length) && length > 0;
}

/** The media type without parameters (`multipart/form-data`, not its boundary), lower case; empty when absent. */
export function mediaTypeOf(request: IdempotencyRequest): string {
  const header = request.headers['content-type'];
  const value = Array.isArray(header) ? header[0] : header;
  if (!value) return '';
  const semicolon = value.indexOf(';');
  return (semicolon === -1 ? value : value.slice(0, semicolon)).trim().toLowerCase();
}

function omitFor(paths: readonly string[]): OmissionTree | undefined {
  if (paths.length === 0) return undefined;
  let tree = omissions.get(paths);
  if (!tree) omissions.set(paths, (tree = omissionTree(paths)));
  return tree;
}
