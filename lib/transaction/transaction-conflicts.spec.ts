import { StoreUnavailableError } from '../errors/store-unavailable.error';
import { abortedForConflict, isConflict, isConflictOfOurs, markAbortedForConflict, MAX_CONFLICT_RUNS, runAgainOnConflict } from './transaction-conflicts';

/** A failed query as TypeORM reports it: pg's error, with its SQLSTATE, as `driverError`. */
const queryFailed = (code: string) => Object.assign(new Error(`query failed (${code})`), { driverError: { code, severity: 'ERROR' } });

describe('transaction conflicts', () => {
  it('calls a serialization failure and a deadlock conflicts, from pg or through TypeORM, and nothing else', () => {
    expect(isConflict(queryFailed('40001'))).toBe(true);
    expect(isConflict(Object.assign(new Error('pg'), { code: '40P01', severity: 'ERROR' }))).toBe(true);
    // an app's own error that only carries the code
    expect(isConflict(Object.assign(new Error('mine'), { code: '40001' }))).toBe(false);
    expect(isConflict(queryFailed('23505'))).toBe(false);
    expect(isConflict(new Error('plain'))).toBe(false);
    expect(isConflict(undefined)).toBe(false);
  });

  it('takes the library\'s own conflicts (a store error wrapping one) as aborted, and the work\'s once marked so', () => {
    const ours = new StoreUnavailableError(queryFailed('40001'));
    expect(isConflictOfOurs(ours)).toBe(true);
    expect(isConflictOfOurs(queryFailed('40001'))).toBe(false);
    expect(isConflictOfOurs(new StoreUnavailableError(queryFailed('08006')))).toBe(false);
    expect(abortedForConflict(ours)).toBe(true);
    expect(abortedForConflict(new StoreUnavailableError(queryFailed('08006')))).toBe(false);
    // the work's conflict counts only once the transaction was found aborted by it (TransactionalCall marks it)
    const works = queryFailed('40P01');
    expect(abortedForConflict(works)).toBe(false);
    markAbortedForConflict(works, true);
    expect(abortedForConflict(works)).toBe(true);
    expect(abortedForConflict(queryFailed('40P01'))).toBe(false);
    // an outer transaction that the conflict left usable (it aborted a nested call's savepoint) takes the mark back
    markAbortedForConflict(works, false);
    expect(abortedForConflict(works)).toBe(false);
  });

  it('runs again while the work conflicts, and throws the last conflict after the limit', async () => {
    let runs = 0;
    await expect(runAgainOnConflict(async () => (++runs < 3 ? Promise.reject(queryFailed('40001')) : 'done'), isConflict)).resolves.toBe('done');
    expect(runs).toBe(3);
    runs = 0;
    const last = queryFailed('40P01');
    await expect(runAgainOnConflict(() => { runs++; return Promise.reject(last); }, isConflict)).rejects.toBe(last);
    expect(runs).toBe(MAX_CONFLICT_RUNS);
  });

  it('throws any other error at once', async () => {
    let runs = 0;
    const other = queryFailed('23505');
    await expect(runAgainOnConflict(() => { runs++; return Promise.reject(other); }, isConflict)).rejects.toBe(other);
    expect(runs).toBe(1);
  });
});
