import { canonicalJson, NotSerializableError, omissionTree } from './canonical-json';

describe('canonicalJson', () => {
  it('sorts object keys at every depth', () => {
    expect(canonicalJson({ b: 2, a: 1 })).toBe('{"a":1,"b":2}');
    expect(canonicalJson({ a: 1, b: 2 })).toBe(canonicalJson({ b: 2, a: 1 }));
    expect(canonicalJson({ z: { y: 1, x: [{ d: 1, c: 2 }] }, a: null })).toBe('{"a":null,"z":{"x":[{"c":2,"d":1}],"y":1}}');
  });

  it('keeps array order', () => {
    expect(canonicalJson([3, 1, 2])).toBe('[3,1,2]');
    expect(canonicalJson([3, 1, 2])).not.toBe(canonicalJson([1, 2, 3]));
  });

  it('has no insignificant whitespace and equals JSON.parse of reformatted input', () => {
    const pretty = '{\n  "b" : [ 1 , 2 ],\n  "a" : { "y" : "x y", "x" : true }\n}';
    expect(canonicalJson(JSON.parse(pretty))).toBe('{"a":{"x":true,"y":"x y"},"b":[1,2]}');
  });

  it('writes primitives as JSON does', () => {
    expect(canonicalJson('a"b\\c\n')).toBe(JSON.stringify('a"b\\c\n'));
    expect(canonicalJson(1.5)).toBe('1.5');
    expect(canonicalJson(-0)).toBe('0');
    expect(canonicalJson(true)).toBe('true');
    expect(canonicalJson(false)).toBe('false');
    expect(canonicalJson(null)).toBe('null');
    expect(canonicalJson('ü€😀')).toBe('"ü€😀"');
  });

  it('drops undefined, function and symbol properties like JSON.stringify, and writes undefined array items as null', () => {
    expect(canonicalJson({ a: undefined, b: () => 1, c: Symbol('x'), d: 1 })).toBe('{"d":1}');
    expect(canonicalJson([undefined, 1])).toBe('[null,1]');
  });

  it('honours toJSON (Dates become ISO strings)', () => {
    const date = new Date('2024-01-02T03:04:05.678Z');
    expect(canonicalJson({ at: date })).toBe('{"at":"2024-01-02T03:04:05.678Z"}');
    expect(canonicalJson({ toJSON: () => ({ b: 1, a: 2 }) })).toBe('{"a":2,"b":1}');
  });

  it('matches JSON.stringify for already sorted plain data', () => {
    const value = { a: [1, 'two', { c: false, d: null }], b: { e: 1e21, f: 0.1 } };
    expect(canonicalJson(value)).toBe(JSON.stringify(value));
  });

  it('allows the same object twice when it is not a cycle', () => {
    const shared = { x: 1 };
    expect(canonicalJson({ a: shared, b: shared, c: [shared, shared] })).toBe('{"a":{"x":1},"b":{"x":1},"c":[{"x":1},{"x":1}]}');
  });

  it.each([
    ['NaN', { a: NaN }, '$.a'],
    ['Infinity', { a: [1, Infinity] }, '$.a[1]'],
    ['BigInt', { n: BigInt(1) }, '$.n'],
    ['a top-level function', () => 1, '$'],
    ['a top-level symbol', Symbol('s'), '$'],
    ['a Map', { m: new Map([[1, 2]]) }, '$.m'],
    ['a Set', { s: new Set([1]) }, '$.s'],
  ])('rejects %s with NotSerializableError naming the path', (_name, value, path) => {
    let error: unknown;
    try {
      canonicalJson(value);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(NotSerializableError);
    expect((error as NotSerializableError).path).toBe(path);
    expect((error as Error).message).toContain(path);
  });

  it('rejects cycles', () => {
    const a: Record<string, unknown> = { x: 1 };
    a.self = a;
    expect(() => canonicalJson(a)).toThrow(NotSerializableError);
    const arr: unknown[] = [];
    arr.push(arr);
    expect(() => canonicalJson(arr)).toThrow(/circular/);
  });

  it('handles nesting far deeper than the call stack', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = { a: [deep] };
    const text = canonicalJson(deep);
    expect(text.length).toBe(100_000 * 8 + 1);
    expect(text.startsWith('{"a":[{"a":[')).toBe(true);
  });

  it('names the path of a bad value deep inside', () => {
    expect(() => canonicalJson({ a: [{ b: 1 }, { c: [NaN] }] })).toThrow('$.a[1].c[0]');
  });

  it('leaves out the fields of an omission tree, at any depth, without touching the value', () => {
    const value = { amount: 1, nonce: 'n', meta: { sentAt: 't', id: 7 }, list: [{ x: 1, y: 2 }] };
    const omit = omissionTree(['nonce', 'meta.sentAt', 'list.0.y', 'missing.path']);
    expect(canonicalJson(value, omit)).toBe('{"amount":1,"list":[{"x":1}],"meta":{"id":7}}');
    expect(value.nonce).toBe('n');
    expect(canonicalJson(value, omissionTree(['meta', 'meta.id']))).toBe('{"amount":1,"list":[{"x":1,"y":2}],"nonce":"n"}');
  });

  // The recursive fast path (no omission tree) and the iterative writer (an empty tree) must give the same text.
  it.each([
    ['flat object', { b: 2, a: 1, c: 'x' }],
    ['nested arrays and objects', { z: [1, { y: [true, null, 'é'] }], a: { b: { c: -0 } } }],
    ['undefined and function fields', { a: undefined, b: () => 1, c: [undefined, 2] }],
    ['toJSON and dates', { when: new Date(0), custom: { toJSON: () => ({ k: 1 }) } }],
    ['null-prototype objects', Object.assign(Object.create(null) as object, { b: 1, a: 2 })],
    ['deeper than the fast path', { a: { b: { c: { d: { e: { f: { g: { h: { i: { j: [1] } } } } } } } } } }],
    ['strings that need escaping', { 'k"\\': 'line\nbreak\u0000', '\u2028': '😀' }],
  ])('fast path and iterative writer agree: %s', (_name, value) => {
    expect(canonicalJson(value)).toBe(canonicalJson(value, {}));
  });

  it('the fast path rejects what the iterative writer rejects', () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = { back: cyclic };
    expect(() => canonicalJson(cyclic)).toThrow('circular reference');
    expect(() => canonicalJson({ a: [Infinity] })).toThrow('$.a[0]');
  });
});
