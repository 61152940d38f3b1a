import { isStoreOutage } from './store-failure';

/** An error as pg reports one from the server: a SQLSTATE code and a severity. */
function serverError(code: string): Error {
  return Object.assign(new Error(`server said ${code}`), { code, severity: 'ERROR' });
}

describe('isStoreOutage', () => {
  it.each(['08006', '08001', '57P01', '57P03', '53300', '40001', '40P01', '58030'])('SQLSTATE %s (the server cannot work now) is an outage', (code) => {
    expect(isStoreOutage(serverError(code))).toBe(true);
  });

  it.each(['22001', '54000', '23514', '42P01', '42703', 'XX000'])('SQLSTATE %s (the request or schema is refused) is not an outage', (code) => {
    expect(isStoreOutage(serverError(code))).toBe(false);
  });

  it('connection-level errors without a SQLSTATE are outages', () => {
    expect(isStoreOutage(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }))).toBe(true);
    expect(isStoreOutage(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }))).toBe(true);
    expect(isStoreOutage(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isStoreOutage(new Error('timeout exceeded when trying to connect'))).toBe(true);
  });

  it('looks through a driver wrapper (TypeORM QueryFailedError.driverError)', () => {
    expect(isStoreOutage(Object.assign(new Error('query failed'), { driverError: serverError('54000') }))).toBe(false);
    expect(isStoreOutage(Object.assign(new Error('query failed'), { driverError: serverError('57P01') }))).toBe(true);
  });

  it('programming errors are not outages', () => {
    expect(isStoreOutage(new TypeError('x is not a function'))).toBe(false);
    expect(isStoreOutage(new RangeError('Maximum call stack size exceeded'))).toBe(false);
  });
});
