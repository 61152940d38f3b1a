import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { patchResponse, WireMethods } from './raw-response';

/** A Node response; `prototype`: replaced as Express does on every request. */
function response(prototype?: object): ServerResponse {
  const res = new ServerResponse(new IncomingMessage(new Socket()));
  if (prototype) Object.setPrototypeOf(res, prototype);
  return res;
}

function recorder(calls: string[]): WireMethods {
  return {
    writeHead: () => calls.push('writeHead'),
    write: () => calls.push('write'),
    end: () => calls.push('end'),
  };
}

const expressLike = Object.create(ServerResponse.prototype, { send: { value: () => 'sent' } }) as object;

describe('patchResponse', () => {
  it.each([
    ['a Node response (Fastify)', () => response()],
    ['a response whose prototype was replaced (Express)', () => response(expressLike)],
  ])('routes the wire methods of %s to the patch, and restore() puts everything back', (_what, make) => {
    const res = make();
    const prototype = Object.getPrototypeOf(res) as object;
    const calls: string[] = [];
    const original = patchResponse(res, recorder(calls));
    res.writeHead(201);
    res.write('a');
    res.end('b');
    expect(calls).toEqual(['writeHead', 'write', 'end']);
    expect(res.headersSent).toBe(false); // nothing reached Node's methods
    expect(original.end).toBe(ServerResponse.prototype.end);

    original.restore();
    expect(Object.getPrototypeOf(res)).toBe(prototype);
    expect(Object.getOwnPropertyNames(res).filter((n) => ['writeHead', 'write', 'end'].includes(n))).toEqual([]);
    expect(res.end).toBe(ServerResponse.prototype.end);
    expect(calls).toHaveLength(3);
  });

  it('patches only the response it is given: another response of the same prototype is untouched', () => {
    const patched = response(expressLike);
    const other = response(expressLike);
    const calls: string[] = [];
    const original = patchResponse(patched, recorder(calls));
    expect(other.end).toBe(ServerResponse.prototype.end);
    expect(Object.getPrototypeOf(other)).toBe(expressLike);
    original.restore();
  });

  it('keeps and puts back own methods another library patched in (on-headers wraps writeHead)', () => {
    const res = response(expressLike);
    const wrapped: string[] = [];
    const writeHead = ServerResponse.prototype.writeHead;
    const onHeaders = function (this: ServerResponse, ...args: Parameters<ServerResponse['writeHead']>) {
      wrapped.push('on-headers');
      return writeHead.apply(this, args);
    };
    res.writeHead = onHeaders as ServerResponse['writeHead'];
    const calls: string[] = [];
    const original = patchResponse(res, recorder(calls));
    res.writeHead(200);
    expect(calls).toEqual(['writeHead']);
    expect(original.writeHead).toBe(onHeaders);
    original.restore();
    expect(res.writeHead).toBe(onHeaders);
    expect(Object.getPrototypeOf(res)).toBe(expressLike);
  });

  it('nests: a second patch of a patched response is undone before the first', () => {
    const res = response(expressLike);
    const outer: string[] = [];
    const inner: string[] = [];
    const first = patchResponse(res, recorder(outer));
    const second = patchResponse(res, recorder(inner));
    res.end();
    second.restore();
    res.end();
    first.restore();
    expect(inner).toEqual(['end']);
    expect(outer).toEqual(['end']);
    expect(Object.getPrototypeOf(res)).toBe(expressLike);
    expect(res.end).toBe(ServerResponse.prototype.end);
  });
});
