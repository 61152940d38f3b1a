import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { BodyNotFingerprintableError } from '../errors/body-not-fingerprintable.error';
import type { IdempotencyRequest } from '../interfaces/idempotency-options.interface';
import { canonicalJson, OmissionTree } from '../utils/canonical-json';

/**
 * An uploaded file as multer (`request.file`, `request.files`), express-fileupload (`request.files` by field:
 * `name`, `data`, `tempFilePath`) or `@fastify/multipart` (`attachFieldsToBody`) gives it.
 */
interface UploadedFile {
  fieldname?: string;
  originalname?: string;
  filename?: string;
  name?: string;
  mimetype?: string;
  buffer?: Buffer;
  data?: Buffer;
  path?: string;
  tempFilePath?: string;
  _buf?: Buffer;
}

/** What stands for a file in the fingerprint: its field, name, type and a hash of its content. */
interface FileEntry {
  field: string;
  name: string;
  type: string;
  sha256: string | Promise<string>;
}

/** True when the request carries parsed multipart parts: multer's `file`/`files`, or a multipart body parsed into an object. */
export function hasMultipartParts(request: IdempotencyRequest): boolean {
  // Only data counts: @fastify/multipart decorates every request with `file()` and `files()` methods.
  if (isObject(request.file) || (typeof request.files === 'object' && request.files !== null)) return true;
  const type = request.headers['content-type'];
  return typeof type === 'string' && /^\s*multipart\//i.test(type) && typeof request.body === 'object' && request.body !== null;
}

/**
 * The multipart part of the fingerprint: the fields (in canonical JSON, `omit` applied) and each file's
 * field, name, type and SHA-256 of its content, whatever boundary the client chose. Async only when a
 * file has to be read from disk (multer's disk storage).
 */
export function multipartPayload(request: IdempotencyRequest, omit: OmissionTree | undefined, mediaType: string): string | Promise<string> {
  const files: FileEntry[] = [];
  const fields = request.body === undefined || request.body === null ? {} : normalizeParts(request.body, files, mediaType);
  for (const file of uploadedFiles(request.file, request.files)) files.push(fileEntry(file, mediaType));
  const write = (resolved: FileEntry[]) => canonicalJson({ fields, files: resolved }, omit && { fields: omit });
  if (!files.some((f) => typeof f.sha256 !== 'string')) return write(files);
  return Promise.all(files.map(async (f) => ({ ...f, sha256: await f.sha256 }))).then(write);
}

/**
 * `file` (multer's single file); `files` as an array (`FilesInterceptor`, `AnyFilesInterceptor`) or by field, each
 * field holding an array (`FileFieldsInterceptor`) or one file (express-fileupload).
 */
function uploadedFiles(file: unknown, files: unknown): UploadedFile[] {
  const list: UploadedFile[] = [];
  if (isObject(file)) list.push(file);
  if (Array.isArray(files)) {
    list.push(...(files as UploadedFile[]));
  } else if (isObject(files)) {
    for (const [field, group] of Object.entries(files)) {
      for (const one of Array.isArray(group) ? (group as unknown[]) : [group]) if (isObject(one)) list.push({ fieldname: field, ...one });
    }
  }
  return list;
}

/** Replaces the file parts and Buffers of a parsed multipart body (its fields, one level deep) by file entries, and field parts by their values. */
function normalizeParts(body: unknown, files: FileEntry[], mediaType: string): unknown {
  if (!isObject(body)) return body;
  const one = (value: unknown): unknown => {
    if (Buffer.isBuffer(value)) return { sha256: digest(value) };
    if (!isObject(value) || !isPart(value)) return value;
    if (value.type === 'field') return value.value;
    files.push(fileEntry(value as UploadedFile, mediaType));
    return { file: files.length - 1 };
  };
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(body)) out[name] = Array.isArray(value) ? value.map(one) : one(value);
  return out;
}

/** A `@fastify/multipart` part: `{ type: 'file' | 'field', fieldname, … }`. */
function isPart(value: Record<string, unknown>): value is Record<string, unknown> & { type: 'file' | 'field'; value?: unknown } {
  return (value.type === 'file' || value.type === 'field') && typeof value.fieldname === 'string';
}

function fileEntry(file: UploadedFile, mediaType: string): FileEntry {
  const content = file.buffer ?? file._buf ?? file.data;
  const entry = { field: file.fieldname ?? '', name: file.originalname ?? file.filename ?? file.name ?? '', type: file.mimetype ?? '' };
  // express-fileupload with useTempFiles leaves `data` empty and the content in `tempFilePath`.
  const path = file.path ?? (file.tempFilePath || undefined);
  if (Buffer.isBuffer(content) && (content.length > 0 || path === undefined)) return { ...entry, sha256: digest(content) };
  if (path !== undefined) return { ...entry, sha256: digestFile(path) };
  throw new BodyNotFingerprintableError(
    mediaType,
    `the uploaded file in field "${entry.field}" has neither its content in memory nor a path on disk, so it cannot be part of the request fingerprint`,
  );
}

function digest(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('base64url');
}

function digestFile(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const hash = createHash('sha256');
    createReadStream(path)
      .on('data', (chunk) => hash.update(chunk))
      .on('error', reject)
      .on('end', () => resolve(hash.digest('base64url')));
  });
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
