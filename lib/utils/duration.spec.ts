import { parseDuration } from './duration';

describe('parseDuration', () => {
  it.each([
    [0, 0],
    [1500, 1500],
    [1.4, 1],
    [1.6, 2],
    ['0', 0],
    ['250', 250],
    ['250ms', 250],
    ['30s', 30_000],
    ['1.5s', 1500],
    ['5m', 300_000],
    ['24h', 86_400_000],
    ['7d', 604_800_000],
    ['2w', 1_209_600_000],
    [' 10 s ', 10_000],
    ['25d', 2_160_000_000],
    ['1000w', 604_800_000_000],
    ['365250d', 31_557_600_000_000],
  ])('%p is %p ms', (input, expected) => {
    expect(parseDuration(input)).toBe(expected);
  });

  it.each([
    ['abc'],
    ['nope'],
    [''],
    ['-5s'],
    ['5 sec'],
    ['5x'],
    ['s'],
    ['1e3'],
    ['10S'],
  ])('rejects the string %p with an explanation', (input) => {
    const result = parseDuration(input);
    expect(typeof result).toBe('object');
    expect((result as { error: string }).error).toContain('is not a duration');
  });

  it.each([[-1], [NaN], [Infinity], [-Infinity]])('rejects the number %p', (input) => {
    const result = parseDuration(input);
    expect(result).toEqual({ error: expect.stringContaining('non-negative') });
  });

  it.each([[null], [undefined], [true], [{}], [[]]])('rejects a %p value by its type', (input) => {
    const result = parseDuration(input);
    expect(result).toEqual({ error: expect.stringContaining('expected milliseconds') });
  });

  it('never throws', () => {
    for (const value of [Symbol('x'), () => 1, BigInt(3), 'x'.repeat(10_000)]) {
      expect(() => parseDuration(value)).not.toThrow();
    }
  });

  it.each([['365251d'], [Number.MAX_SAFE_INTEGER], ['99999999999999w']])('rejects %p beyond 1000 years, naming the maximum', (input) => {
    expect(parseDuration(input)).toEqual({ error: expect.stringContaining('at most 1000 years ("365250d"') });
  });
});
