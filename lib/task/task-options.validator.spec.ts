import { checkTaskOptions } from './task-options.validator';

describe('@Task() options', () => {
  it('reports an unknown key once, with the nearest valid key and the task options', () => {
    const problems: string[] = [];
    checkTaskOptions({ atempts: 3 } as never, 'charge', '@Task() on Billing.charge', problems);
    expect(problems).toEqual([expect.stringMatching(/^@Task\(\) on Billing\.charge: unknown option "atempts"; did you mean attempts\? \(the options are .*identity, retention/)]);
  });

  it('checks the options it shares with @Step() as @Step() does', () => {
    const problems: string[] = [];
    const checked = checkTaskOptions({ attempts: 0, identity: 'strict' }, 'charge', '@Task() on Billing.charge', problems);
    expect(problems).toEqual([expect.stringContaining('attempts')]);
    expect(checked.identity).toBe('strict');
  });
});
