import { Client } from 'pg';
import { inlineStatementText, quoteLiteral } from './inline-statement';

describe('quoteLiteral', () => {
  const client = new Client(); // never connected: escapeLiteral is a pure function
  it.each([
    [''], ['plain'], ["it's"], ["''"], ['back\\slash'], ["both ' and \\"], ['{"a":"say \\"hi\\"","b":"O\'Brien"}'], ['$1 and $$'], ['ünïcødé ✓'],
  ])('writes %j as node-postgres escapeLiteral does', (value) => {
    expect(quoteLiteral(value)).toBe(client.escapeLiteral(value));
  });
});

describe('inlineStatementText', () => {
  const statement = { text: 'SELECT $1::text, $2::int, $3::jsonb, $10::text', name: 'x' };
  const values = ["a'b", 7.9, null, 'c', 'd', 'e', 'f', 'g', 'h', 'ten'];

  it('puts literals in place of the parameters ($10 is not $1 followed by 0)', () => {
    expect(inlineStatementText({ statement, values })).toBe("SELECT 'a''b'::text, 7::int, NULL::jsonb, 'ten'::text");
  });

  it('executes a statement prepared on the connection with the same literals', () => {
    expect(inlineStatementText({ statement, values: ["a'b", 7, null] }, 'x_sql')).toBe("EXECUTE x_sql('a''b', 7, NULL)");
  });
});
