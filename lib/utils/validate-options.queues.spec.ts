import { IdempotencyConfigError } from '../errors/idempotency-config.error';
import { resolveOptions } from './validate-options';

const PG = { url: 'postgres://postgres@127.0.0.1:5432/db' };

function problem(options: Record<string, unknown>): string {
  try {
    resolveOptions({ postgres: PG, redis: { url: 'redis://127.0.0.1:6379' }, ...options });
  } catch (err) {
    expect(err).toBeInstanceOf(IdempotencyConfigError);
    return (err as Error).message;
  }
  throw new Error('expected an IdempotencyConfigError');
}

describe('options of Redis Cluster and workflow queues', () => {
  it('accept cluster startup nodes with optional Cluster options', () => {
    const r = resolveOptions({ postgres: PG, redis: { cluster: { nodes: [{ host: '127.0.0.1', port: 7000 }], options: { scaleReads: 'master' } } } });
    expect(r.redis && r.redis.connection).toEqual({ cluster: { nodes: [{ host: '127.0.0.1', port: 7000 }], options: { scaleReads: 'master' } } });
  });

  it('refuse cluster settings without startup nodes, naming the option', () => {
    expect(problem({ redis: { cluster: { nodes: [] } } })).toContain('redis.cluster.nodes');
    expect(problem({ redis: { cluster: { nodes: [{ host: 'x', port: 1 }], options: 'fast' } } })).toContain('redis.cluster.options');
  });

  it('leave the queue prefix to be derived unless given, and check workflows.app', () => {
    const r = resolveOptions({ postgres: PG, redis: false });
    expect(r.workflows.queuePrefix).toBeUndefined();
    expect(resolveOptions({ postgres: PG, redis: false, workflows: { queuePrefix: '{wf}', app: 'billing' } }).workflows).toMatchObject({ queuePrefix: '{wf}', app: 'billing' });
    expect(problem({ workflows: { app: '' } })).toContain('workflows.app');
  });
});
