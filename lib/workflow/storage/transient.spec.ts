import { isTransientDatabaseError, retryTransient } from './transient';

describe('transient database errors', () => {
  it('recognises lost and refused connections, not query errors', () => {
    expect(isTransientDatabaseError(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }))).toBe(true);
    expect(isTransientDatabaseError(Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }))).toBe(true);
    expect(isTransientDatabaseError(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isTransientDatabaseError(new Error('Client was closed and is not queryable'))).toBe(true);
    expect(isTransientDatabaseError(new Error('Query read timeout'))).toBe(true);
    expect(isTransientDatabaseError(Object.assign(new Error('write after end'), { code: 'ERR_STREAM_WRITE_AFTER_END' }))).toBe(true);
    expect(isTransientDatabaseError(Object.assign(new Error('duplicate key'), { code: '23505' }))).toBe(false);
    expect(isTransientDatabaseError(new Error('card declined'))).toBe(false);
    expect(isTransientDatabaseError('nope')).toBe(false);
  });

  it('retries transient failures until the call succeeds, and gives up on other errors at once', async () => {
    let calls = 0;
    await expect(retryTransient(() => (++calls < 3 ? Promise.reject(Object.assign(new Error('x'), { code: 'ECONNRESET' })) : Promise.resolve('ok')), 5000)).resolves.toBe('ok');
    expect(calls).toBe(3);
    calls = 0;
    await expect(retryTransient(() => {
      calls++;
      return Promise.reject(Object.assign(new Error('bad sql'), { code: '42601' }));
    }, 5000)).rejects.toThrow('bad sql');
    expect(calls).toBe(1);
  });
});
