import { MissingWorkflowIdError } from '../errors/missing-workflow-id.error';
import { canonicalJson } from '../utils/canonical-json';
import { inputHash, resolveWorkflowId } from './workflow-identity';

describe('workflow identity', () => {
  const hash = (name: string, input: unknown) => inputHash(name, canonicalJson(input));

  it('strict: same workflow and canonical input → same id; key order is irrelevant, array order and the name are not', () => {
    const a = resolveWorkflowId('w', 'strict', hash('w', { b: 1, a: [1, 2] }));
    expect(resolveWorkflowId('w', 'strict', hash('w', { a: [1, 2], b: 1 }))).toBe(a);
    expect(resolveWorkflowId('w', 'strict', hash('w', { a: [2, 1], b: 1 }))).not.toBe(a);
    expect(resolveWorkflowId('v', 'strict', hash('v', { b: 1, a: [1, 2] }))).not.toBe(a);
  });

  it('caller_provided without an id throws MissingWorkflowIdError; always_unique draws new ids', () => {
    expect(() => resolveWorkflowId('w', 'caller_provided', 'h')).toThrow(MissingWorkflowIdError);
    expect(resolveWorkflowId('w', 'always_unique', 'h')).not.toBe(resolveWorkflowId('w', 'always_unique', 'h'));
  });

  it('an explicit id always wins; an empty or oversized id is refused', () => {
    for (const identity of ['strict', 'caller_provided', 'always_unique'] as const) expect(resolveWorkflowId('w', identity, 'h', 'mine')).toBe('mine');
    expect(() => resolveWorkflowId('w', 'strict', 'h', '')).toThrow(TypeError);
    expect(() => resolveWorkflowId('w', 'strict', 'h', 'x'.repeat(256))).toThrow(TypeError);
  });
});
