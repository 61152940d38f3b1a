import { checkStepOptions, checkWorkflowOptions } from './workflow-definition.validator';

describe('workflow definition validation', () => {
  it('fills in defaults', () => {
    const problems: string[] = [];
    expect(checkWorkflowOptions({}, 'Orders', problems)).toEqual({ name: 'Orders', queue: 'workflows', identity: 'strict', timeoutMs: undefined, retentionMs: undefined });
    expect(checkStepOptions({}, 'charge', 'w', problems)).toEqual({ name: 'charge', attempts: 1, backoff: undefined, timeoutMs: undefined, queue: 'steps', transaction: false });
    expect(problems).toEqual([]);
  });

  it('parses durations and backoff', () => {
    const problems: string[] = [];
    expect(checkWorkflowOptions({ timeout: '5m', retention: '7d', identity: 'always_unique' }, 'W', problems)).toMatchObject({ timeoutMs: 300_000, retentionMs: 604_800_000, identity: 'always_unique' });
    expect(checkStepOptions({ attempts: 3, backoff: { type: 'exponential', delay: 100 }, timeout: '2s' }, 's', 'w', problems)).toMatchObject({ attempts: 3, backoff: { type: 'exponential', delay: 100 }, timeoutMs: 2000 });
    expect(problems).toEqual([]);
  });

  it('reports every invalid option with where it is', () => {
    const problems: string[] = [];
    checkWorkflowOptions({ name: '', identity: 'nope' as never, retention: -1, extra: 1 } as never, 'W', problems);
    checkStepOptions({ attempts: 1.5, backoff: -1, timeout: 'x', queue: 'has space', retries: 2 } as never, 's', '@Step() on W.s', problems);
    expect(problems).toHaveLength(9);
    expect(problems.join('\n')).toMatch(/@Workflow\(\) on W: unknown option "extra"/);
    expect(problems.join('\n')).toMatch(/@Step\(\) on W\.s: attempts must be a whole number/);
  });
});
