import { isRowLevelFailure, StatementBatches } from './statement-batches';

/** A Postgres-like error with a SQLSTATE. */
function pgError(code: string): Error & { code: string } {
  return Object.assign(new Error(`sqlstate ${code}`), { code });
}

/** Statement batches over fakes that record what was sent, one entry per statement. */
function recorded(together: (inputs: string[]) => Promise<ReadonlyArray<string | undefined>>) {
  const sent: string[][] = [];
  const batches = new StatementBatches<string, string>(
    (input) => {
      sent.push([input]);
      return input.startsWith('bad') ? Promise.reject(pgError('22021')) : Promise.resolve(`alone:${input}`);
    },
    async (inputs) => {
      sent.push(inputs);
      return together(inputs);
    },
    (input) => input.split('#')[0],
  );
  return { sent, batches };
}

describe('StatementBatches', () => {
  it('sends the calls of one tick together, and a call alone in its tick on its own', async () => {
    const { sent, batches } = recorded((inputs) => Promise.resolve(inputs.map((i) => `together:${i}`)));
    expect(await Promise.all(['a', 'b', 'c'].map((i) => batches.run(i)))).toEqual(['together:a', 'together:b', 'together:c']);
    expect(await batches.run('d')).toBe('alone:d');
    expect(sent).toEqual([['a', 'b', 'c'], ['d']]);
  });

  it('never puts two calls with one identity in a statement: the later one goes alone', async () => {
    const { sent, batches } = recorded((inputs) => Promise.resolve(inputs.map((i) => `together:${i}`)));
    expect(await Promise.all(['k#1', 'x', 'k#2'].map((i) => batches.run(i)))).toEqual(['together:k#1', 'together:x', 'alone:k#2']);
    expect(sent).toContainEqual(['k#1', 'x']);
    expect(sent).toContainEqual(['k#2']);
  });

  it('sends alone what the statement left unanswered', async () => {
    const { sent, batches } = recorded((inputs) => Promise.resolve(inputs.map((i) => (i === 'b' ? undefined : `together:${i}`))));
    expect(await Promise.all(['a', 'b'].map((i) => batches.run(i)))).toEqual(['together:a', 'alone:b']);
    expect(sent).toEqual([['a', 'b'], ['b']]);
  });

  it('after a failure one row may have caused, sends each call alone: only the bad one fails', async () => {
    const { sent, batches } = recorded(() => Promise.reject(pgError('22021')));
    const settled = await Promise.allSettled(['a', 'bad', 'c'].map((i) => batches.run(i)));
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(sent).toEqual([['a', 'bad', 'c'], ['a'], ['bad'], ['c']]);
  });

  it('after any other failure (the connection, the server), fails every call with it and sends nothing more', async () => {
    const down = Object.assign(new Error('Connection terminated unexpectedly'), {});
    const { sent, batches } = recorded(() => Promise.reject(down));
    const settled = await Promise.allSettled(['a', 'b'].map((i) => batches.run(i)));
    expect(settled).toEqual([{ status: 'rejected', reason: down }, { status: 'rejected', reason: down }]);
    expect(sent).toEqual([['a', 'b']]);
  });
});

describe('isRowLevelFailure', () => {
  it.each([
    ['22021', true], // invalid byte sequence (a NUL in a key)
    ['22P05', true], // untranslatable character (jsonb)
    ['23505', true], // unique violation
    ['40P01', true], // deadlock
    ['40001', true], // serialization failure
    ['55P03', true], // lock timeout
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
