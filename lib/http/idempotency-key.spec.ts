import { MAX_KEY_LENGTH, parseIdempotencyKey } from './idempotency-key';

describe('parseIdempotencyKey', () => {
  it('accepts a bare key', () => {
    expect(parseIdempotencyKey('abc-123')).toEqual({ key: 'abc-123' });
  });

  it('treats the structured-field string "abc" and bare abc as the same key', () => {
    expect(parseIdempotencyKey('"abc"')).toEqual(parseIdempotencyKey('abc'));
    expect(parseIdempotencyKey('"8e03978e-40d5-43e8-bc93-6894a57f9324"')).toEqual({ key: '8e03978e-40d5-43e8-bc93-6894a57f9324' });
  });

  it('unescapes \\" and \\\\ inside the quoted form', () => {
    expect(parseIdempotencyKey('"a\\"b\\\\c"')).toEqual({ key: 'a"b\\c' });
  });

  it('accepts every printable ASCII character, including spaces inside', () => {
    let all = '';
    for (let c = 0x21; c <= 0x7e; c++) all += String.fromCharCode(c);
    expect(parseIdempotencyKey(all)).toEqual({ key: all });
    expect(parseIdempotencyKey('a b')).toEqual({ key: 'a b' });
  });

  it('accepts 1 and 255 characters', () => {
    expect(parseIdempotencyKey('x')).toEqual({ key: 'x' });
    expect(parseIdempotencyKey('k'.repeat(MAX_KEY_LENGTH))).toEqual({ key: 'k'.repeat(255) });
    expect(parseIdempotencyKey(`"${'k'.repeat(255)}"`)).toEqual({ key: 'k'.repeat(255) });
  });

  it('takes a header given once as an array', () => {
    expect(parseIdempotencyKey(['abc'])).toEqual({ key: 'abc' });
  });

  it.each([
    ['empty', ''],
    ['only spaces', '   '],
    ['an empty quoted string', '""'],
    ['256 characters', 'k'.repeat(256)],
    ['256 characters quoted', `"${'k'.repeat(256)}"`],
    ['non-ASCII', 'clé'],
    ['an emoji', 'key-😀'],
    ['a control character', 'a\u0001b'],
    ['a tab inside', 'a\tb'],
    ['DEL', 'a\u007fb'],
    ['an unterminated quote', '"abc'],
    ['a lone quote', '"'],
    ['a bare quote inside the quoted form', '"a"b"'],
    ['an invalid escape', '"a\\nb"'],
    ['a trailing backslash', '"abc\\"'],
    ['text after the closing quote', '"abc"def'],
  ])('rejects %s', (_name, raw) => {
    const parsed = parseIdempotencyKey(raw);
    expect('error' in parsed).toBe(true);
    expect((parsed as { error: string }).error.length).toBeGreaterThan(0);
  });

  it('rejects the header sent twice or as an empty list', () => {
    expect(parseIdempotencyKey(['a', 'b'])).toEqual({ error: expect.stringContaining('once') });
    expect(parseIdempotencyKey([])).toEqual({ error: expect.any(String) });
  });
});
