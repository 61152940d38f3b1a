import { isRowLevelFailure } from './row-level-failure';

/** A Postgres-like error with a SQLSTATE. */
function pgError(code: string): Error & { code: string } {
  return Object.assign(new Error(`sqlstate ${code}`), { code });
}

describe('isRowLevelFailure', () => {
  it.each([
    ['22021', true], // invalid byte sequence (a NUL in a key)
    ['22P05', true], // untranslatable character (jsonb)
    ['23505', true], // unique violation
    ['40P01', true], // deadlock
    ['40001', true], // serialization failure
    ['55P03', true], // lock timeout
    ['54000', true], // index row too large (a very long key)
    ['21000', true], // ON CONFLICT DO UPDATE cannot affect row a second time (keys equal once encoded)
    ['08P01', false], // protocol violation (e.g. a pooler's)
    ['58030', false], // I/O error
    ['XX000', false], // internal error
    ['08006', false], // connection failure
    ['57P01', false], // admin shutdown
    ['53300', false], // too many connections
    ['57014', false], // statement timeout
  ])('%s → %s', (code, expected) => {
    expect(isRowLevelFailure(pgError(code))).toBe(expected);
  });

  it('is false for errors without a SQLSTATE, and for non-errors', () => {
    expect(isRowLevelFailure(new Error('timeout exceeded when trying to connect'))).toBe(false);
    expect(isRowLevelFailure(undefined)).toBe(false);
    expect(isRowLevelFailure(null)).toBe(false);
  });
});
