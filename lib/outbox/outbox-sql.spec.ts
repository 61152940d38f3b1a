import { escapeLiteral } from 'pg';
import { inlineParams } from './outbox.sql';

describe('inlineParams (statements sent with BEGIN or COMMIT in one round trip)', () => {
  it('writes each $n in as a literal: integers, escaped strings, NULL, booleans and bigint lists', () => {
    const text = 'SELECT $1, $2, $3, $4, $5, $10';
    const values = [200, "it's", null, false, ['1', '42'], 0, 0, 0, 0, 'last'];
    expect(inlineParams(text, values, escapeLiteral)).toBe("SELECT 200, 'it''s', NULL, false, '{1,42}', 'last'");
  });

  it('refuses what it cannot write safely', () => {
    expect(() => inlineParams('SELECT $1', [1.5], escapeLiteral)).toThrow(/not an integer/);
    expect(() => inlineParams('SELECT $1', [['1', '2); DROP TABLE x; --']], escapeLiteral)).toThrow(/not a list of integers/);
  });
});
