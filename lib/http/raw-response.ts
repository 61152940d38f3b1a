import { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { ResponseReplacement } from './stored-response';

/** A response method called with whatever arguments Node's API allows. */
type Method = (this: ServerResponse, ...args: unknown[]) => unknown;

const PATCHED = ['writeHead', 'write', 'end'] as const;

/** The methods through which Express and Fastify put every response on the wire. */
export type WireMethods = Record<(typeof PATCHED)[number], Method>;

/** The methods a patch replaced, callable on the response, and the way to put them back. */
export interface PatchedResponse extends WireMethods {
  restore(): void;
}

/** Headers that describe a body: dropped when another body is sent in its place. */
const BODY_HEADERS = new Set([
  'content-type', 'content-length', 'content-encoding', 'content-range', 'content-disposition', 'content-language',
  'etag', 'last-modified', 'location', 'transfer-encoding', 'trailer',
]);

/** The Node response under Express's `res` (the response itself) or Fastify's reply (`reply.raw`). */
export function rawResponse(response: unknown): ServerResponse {
  // Express's response is the Node one: tested first, as it is found at once (`raw` would be looked up through
  // the whole prototype chain of Express's response before it is found missing).
  if (typeof (response as ServerResponse).writeHead === 'function' && typeof (response as ServerResponse).end === 'function') return response as ServerResponse;
  const raw = (response as { raw?: ServerResponse }).raw;
  if (typeof raw?.end !== 'function' || typeof raw.writeHead !== 'function') {
    throw new TypeError('IdempotencyInterceptor: the response is neither a Node ServerResponse nor a Fastify reply');
  }
  return raw;
}

/**
 * Makes `writeHead`, `write` and `end` of this one response object call `methods` (nothing else is affected) and
 * returns the methods that were there, bound to nothing: call them with `.apply(raw, args)`; `restore()` undoes it.
 *
 * A response whose prototype was replaced (Express sets its own on every request) gets, for the time of the
 * patch, a prototype whose three methods call the patch of the response they are called on: one prototype per
 * prototype found (cached), so a patch costs two prototype switches that V8 has seen before. Own properties on
 * such a response cost about ten times as much (a new property on it takes V8's slow path: about 20 µs for patch
 * and restore against 2 µs, measured on this machine), which was the largest part of a replay's own CPU on
 * Express. Node's own responses (Fastify's `reply.raw`) get own properties, which is cheaper for them (0.3 µs), as
 * does a response that already has own methods of these names (another library patched them, e.g.
 * `on-headers`: an own method would hide the prototype's) or is patched already.
 */
export function patchResponse(raw: ServerResponse, methods: WireMethods): PatchedResponse {
  const base = Object.getPrototypeOf(raw) as object;
  if (base === ServerResponse.prototype || hasOwnWireMethod(raw) || patches.has(raw)) return patchOwnMethods(raw, methods);
  const original = baseMethods(base);
  patches.set(raw, methods);
  Object.setPrototypeOf(raw, patchedPrototype(base));
  return {
    ...original,
    restore: () => {
      Object.setPrototypeOf(raw, base);
      patches.delete(raw);
    },
  };
}

function hasOwnWireMethod(raw: ServerResponse): boolean {
  return Object.hasOwn(raw, 'writeHead') || Object.hasOwn(raw, 'write') || Object.hasOwn(raw, 'end');
}

/** The patch of each response that has one through {@link patchedPrototype}. */
const patches = new WeakMap<ServerResponse, WireMethods>();
const patchedPrototypes = new WeakMap<object, object>();

function baseMethods(base: object): WireMethods {
  const methods = base as Record<string, unknown>;
  return { writeHead: methods.writeHead as Method, write: methods.write as Method, end: methods.end as Method };
}

/** A prototype over `base` whose wire methods call the response's patch (or `base`'s own, once it is undone). */
function patchedPrototype(base: object): object {
  let prototype = patchedPrototypes.get(base);
  if (prototype) return prototype;
  const original = baseMethods(base);
  const via = (name: (typeof PATCHED)[number]) => function (this: ServerResponse, ...args: unknown[]): unknown {
    return (patches.get(this) ?? original)[name].apply(this, args);
  };
  prototype = Object.create(base, {
    writeHead: { value: via('writeHead'), writable: true, configurable: true },
    write: { value: via('write'), writable: true, configurable: true },
    end: { value: via('end'), writable: true, configurable: true },
  }) as object;
  patchedPrototypes.set(base, prototype);
  return prototype;
}

/**
 * The patch as own properties. `restore()` deletes them in the reverse order they were added, which V8 undoes
 * cheaply (the object keeps its fast shape), and puts back own methods another library had patched in before.
 */
function patchOwnMethods(raw: ServerResponse, methods: WireMethods): PatchedResponse {
  const target = raw as unknown as Record<string, unknown>;
  const saved = PATCHED.map((name) => Object.getOwnPropertyDescriptor(raw, name));
  const original = {
    writeHead: target.writeHead as Method,
    write: target.write as Method,
    end: target.end as Method,
    restore: () => {
      for (let i = PATCHED.length - 1; i >= 0; i--) {
        const descriptor = saved[i];
        if (descriptor) Object.defineProperty(raw, PATCHED[i], descriptor);
        else delete target[PATCHED[i]];
      }
    },
  };
  target.writeHead = methods.writeHead;
  target.write = methods.write;
  target.end = methods.end;
  return original;
}

/** Copies `writeHead` arguments, so that later changes to the caller's header object do not leak in. */
export function copyHead(args: unknown[]): unknown[] {
  return args.map((arg) => (typeof arg === 'object' && arg !== null && !Array.isArray(arg) ? { ...arg } : arg));
}

/** The headers a response goes out with: those set on it, overridden by those given to `writeHead`. */
export function outgoingHeaders(raw: ServerResponse, head: unknown[] | undefined): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = { ...raw.getHeaders() };
  forEachHeadHeader(head, (name, value) => {
    headers[name] = value;
  });
  return headers;
}

/** Calls `visit` with each header given to `writeHead` (lower-case name), in the forms Node accepts. */
function forEachHeadHeader(head: unknown[] | undefined, visit: (name: string, value: OutgoingHttpHeaders[string]) => void): void {
  const given = head === undefined ? undefined : typeof head[1] === 'string' ? head[2] : head[1];
  if (given === undefined || given === null) return;
  const set = (name: unknown, value: unknown) => {
    if (typeof name === 'string' && value !== undefined) visit(name.toLowerCase(), value as OutgoingHttpHeaders[string]);
  };
  if (Array.isArray(given)) {
    if (Array.isArray(given[0])) for (const [name, value] of given as unknown[][]) set(name, value);
    else for (let i = 0; i + 1 < given.length; i += 2) set(given[i], given[i + 1]);
  } else if (typeof given === 'object') {
    for (const name in given) if (Object.prototype.hasOwnProperty.call(given, name)) set(name, (given as Record<string, unknown>)[name]);
  }
}

/** The status a response goes out with. */
export function outgoingStatus(raw: ServerResponse, head: unknown[] | undefined): number {
  return typeof head?.[0] === 'number' ? head[0] : raw.statusCode;
}

/** Collects a `write`/`end` chunk as bytes. */
export function chunkBytes(chunk: unknown, encoding: unknown): Buffer | undefined {
  if (chunk === undefined || chunk === null || typeof chunk === 'function') return undefined;
  if (typeof chunk === 'string') return Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
  if (ArrayBuffer.isView(chunk)) return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  return undefined;
}

/** The callback among `write`/`end` arguments, if any. */
export function callbackOf(args: unknown[]): (() => void) | undefined {
  for (let i = args.length - 1; i >= 0; i--) if (typeof args[i] === 'function') return args[i] as () => void;
  return undefined;
}

/**
 * Sends `replacement` through the original methods: the headers set so far, and those the pipeline gave to
 * `writeHead` (`head`), stay (CORS, request ids…) except those that describe the body that is not sent; the
 * replacement's status, headers and bytes go out instead.
 */
export function sendInstead(raw: ServerResponse, original: WireMethods, head: unknown[] | undefined, replacement: ResponseReplacement, callback?: () => void): void {
  for (const name of raw.getHeaderNames()) if (BODY_HEADERS.has(name)) raw.removeHeader(name);
  forEachHeadHeader(head, (name, value) => {
    if (value !== undefined && !BODY_HEADERS.has(name)) raw.setHeader(name, value);
  });
  const headers = replacement.headers;
  for (const name in headers) if (Object.prototype.hasOwnProperty.call(headers, name)) raw.setHeader(name, headers[name]);
  raw.statusCode = replacement.status;
  const bodyless = replacement.status === 204 || replacement.status === 304 || replacement.status < 200;
  if (bodyless) {
    raw.removeHeader('content-type');
    original.end.call(raw, callback);
    return;
  }
  raw.setHeader('Content-Length', replacement.body.length);
  original.end.call(raw, replacement.body, callback);
}
