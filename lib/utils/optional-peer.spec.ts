import { IdempotencyConfigError } from '../errors/idempotency-config.error';
import { loadPeer } from './optional-peer';

jest.mock('bullmq', () => {
  throw Object.assign(new Error("Cannot find module 'bullmq' from 'lib/utils/optional-peer.ts'"), { code: 'MODULE_NOT_FOUND' });
});
jest.mock('ioredis', () => {
  throw Object.assign(new Error("Cannot find module 'cluster-key-slot' from 'node_modules/ioredis/built/index.js'"), { code: 'MODULE_NOT_FOUND' });
});

describe('loadPeer', () => {
  it('a missing peer fails with IdempotencyConfigError naming the package and what needs it', () => {
    let error: unknown;
    try {
      loadPeer('bullmq', 'workflows');
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(IdempotencyConfigError);
    const problems = (error as IdempotencyConfigError).problems;
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^workflows\b.*"bullmq".*npm install bullmq/);
  });

  it('a peer that is installed but broken (one of its own modules missing) is reported as it is', () => {
    expect(() => loadPeer('ioredis', 'the redis option')).toThrow("Cannot find module 'cluster-key-slot'");
  });

  it('an installed peer is returned', () => {
    expect(typeof loadPeer('typeorm', 'the postgres option').DataSource).toBe('function');
  });
});
