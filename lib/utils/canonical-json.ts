/** Raised when a value has no canonical JSON form (functions, symbols, BigInt, cycles, non-finite numbers). */
export class NotSerializableError extends Error {
  constructor(readonly path: string, reason: string) {
    super(`value at ${path} cannot be serialized to JSON: ${reason}`);
    this.name = 'NotSerializableError';
  }
}

/**
 * Fields to leave out, as a tree of property names: `{ meta: { sentAt: true }, nonce: true }` omits
 * `meta.sentAt` and `nonce`. Build one from dotted paths with {@link omissionTree}.
 */
export interface OmissionTree {
  [name: string]: OmissionTree | true;
}

/** Turns dotted paths (`"meta.sentAt"`) into an {@link OmissionTree}; a shorter path wins over a longer one below it. */
export function omissionTree(paths: readonly string[]): OmissionTree {
  const root: OmissionTree = Object.create(null) as OmissionTree;
  for (const path of paths) {
    const parts = path.split('.');
    let node = root;
    for (let i = 0; i < parts.length; i++) {
      const existing = node[parts[i]];
      if (existing === true) break;
      if (i === parts.length - 1) {
        node[parts[i]] = true;
      } else {
        node = existing ?? (node[parts[i]] = Object.create(null) as OmissionTree);
      }
    }
  }
  return root;
}

/** An array or object being written: its children are visited one by one. */
interface Frame {
  container: object;
  /** Object keys in sorted order; undefined for an array. */
  keys: string[] | undefined;
  /** Index of the next child (an array index, or an index into `keys`). */
  next: number;
  /** Whether a child was written already (a comma goes before the next). */
  wrote: boolean;
  /** The omission subtree for this container's children, if any. */
  omit: OmissionTree | undefined;
}

/**
 * Canonical JSON: object keys sorted at every depth, array order kept, no whitespace.
 * `{"b":2,"a":1}` and `{"a":1,"b":2}` give the same text. `toJSON()` is honoured (Dates become ISO strings).
 * Iterative, so nesting depth is bounded by memory, not by the call stack. `omit` leaves object fields out.
 */
export function canonicalJson(value: unknown, omit?: OmissionTree): string {
  return (omit === undefined ? shallowCanonical(value, SHALLOW_DEPTH) : undefined) ?? iterativeCanonical(value, omit);
}

/** How deep the recursive fast path goes before handing the value to the iterative writer. */
const SHALLOW_DEPTH = 8;

/**
 * The fast path for what request bodies usually are: plain objects and arrays of strings, finite numbers,
 * booleans and null, a few levels deep. Undefined for anything else (toJSON, undefined or function fields,
 * non-finite numbers, deeper nesting, cycles), which the iterative writer then renders or rejects: the text,
 * when there is one, is the same.
 */
function shallowCanonical(value: unknown, depth: number): string | undefined {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      return Number.isFinite(value) ? JSON.stringify(value) : undefined;
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object': {
      if (value === null) return 'null';
      if (depth === 0) return undefined;
      if (Array.isArray(value)) {
        let text = '[';
        for (let i = 0; i < value.length; i++) {
          const item = shallowCanonical(value[i], depth - 1);
          if (item === undefined) return undefined;
          text += i === 0 ? item : `,${item}`;
        }
        return `${text}]`;
      }
      const proto = Object.getPrototypeOf(value) as unknown;
      if (proto !== Object.prototype && proto !== null) return undefined;
      const obj = value as Record<string, unknown>;
      if (typeof obj.toJSON === 'function') return undefined;
      const keys = Object.keys(obj).sort();
      let text = '{';
      for (let i = 0; i < keys.length; i++) {
        const item = shallowCanonical(obj[keys[i]], depth - 1);
        if (item === undefined) return undefined;
        text += `${i === 0 ? '' : ','}${JSON.stringify(keys[i])}:${item}`;
      }
      return `${text}}`;
    }
    default:
      return undefined;
  }
}

function iterativeCanonical(value: unknown, omit: OmissionTree | undefined): string {
  const out: string[] = [];
  const stack: Frame[] = [];
  const seen = new Set<object>();
  let child: unknown = value;
  let childOmit = omit;
  for (;;) {
    // Write `child`: a primitive goes out at once, a container opens a frame.
    const container = open(child, stack, seen, out);
    if (container) stack.push({ container: container.value, keys: container.keys, next: 0, wrote: false, omit: childOmit });
    // Find the next child to write, closing finished containers on the way.
    let found = false;
    while (stack.length > 0) {
      const frame = stack[stack.length - 1];
      if (frame.keys === undefined) {
        const items = frame.container as unknown[];
        if (frame.next < items.length) {
          const i = frame.next++;
          if (frame.wrote) out.push(',');
          frame.wrote = true;
          child = items[i];
          childOmit = subtree(frame.omit, String(i));
          found = true;
          break;
        }
        out.push(']');
      } else {
        const obj = frame.container as Record<string, unknown>;
        while (frame.next < frame.keys.length) {
          const key = frame.keys[frame.next++];
          const item = obj[key];
          if (item === undefined || typeof item === 'function' || typeof item === 'symbol') continue;
          const below = frame.omit?.[key];
          if (below === true) continue;
          out.push(frame.wrote ? `,${JSON.stringify(key)}:` : `${JSON.stringify(key)}:`);
          frame.wrote = true;
          child = item;
          childOmit = below;
          found = true;
          break;
        }
        if (found) break;
        out.push('}');
      }
      seen.delete(frame.container);
      stack.pop();
    }
    if (!found) return out.join('');
  }
}

function subtree(omit: OmissionTree | undefined, name: string): OmissionTree | undefined {
  const below = omit?.[name];
  return below === true ? undefined : below;
}

/** Writes a primitive, or the opening bracket of a container and returns it with its sorted keys. */
function open(value: unknown, stack: readonly Frame[], seen: Set<object>, out: string[]): { value: object; keys: string[] | undefined } | undefined {
  if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    value = (value as { toJSON: () => unknown }).toJSON();
  }
  if (value === null) {
    out.push('null');
    return undefined;
  }
  switch (typeof value) {
    case 'string':
      out.push(JSON.stringify(value));
      return undefined;
    case 'boolean':
      out.push(value ? 'true' : 'false');
      return undefined;
    case 'number':
      if (!Number.isFinite(value)) throw new NotSerializableError(pathOf(stack), `${value} is not a finite number`);
      out.push(JSON.stringify(value));
      return undefined;
    case 'undefined':
      out.push('null');
      return undefined;
    case 'bigint':
      throw new NotSerializableError(pathOf(stack), 'BigInt has no JSON form');
    case 'function':
    case 'symbol':
      throw new NotSerializableError(pathOf(stack), `${typeof value} has no JSON form`);
  }
  const obj = value;
  if (seen.has(obj)) throw new NotSerializableError(pathOf(stack), 'circular reference');
  if (Array.isArray(obj)) {
    seen.add(obj);
    out.push('[');
    return { value: obj, keys: undefined };
  }
  if (obj instanceof Map || obj instanceof Set) {
    throw new NotSerializableError(pathOf(stack), `${obj.constructor.name} has no JSON form; convert it to an object or array`);
  }
  seen.add(obj);
  out.push('{');
  return { value: obj, keys: Object.keys(obj).sort() };
}

/** `$.a[1].b`: where the value being written sits (computed only for an error message). */
function pathOf(stack: readonly Frame[]): string {
  let path = '$';
  for (const frame of stack) {
    const at = frame.next - 1;
    path += frame.keys === undefined ? `[${at}]` : `.${frame.keys[at]}`;
  }
  return path;
}
