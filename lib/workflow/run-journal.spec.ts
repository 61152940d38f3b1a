import { JournalHooks, RunJournal } from './run-journal';
import type { RecordedStep } from './storage/workflow.store';
import type { StepCheckpoint } from './workflow.interfaces';

function row(position: number, sequence: number, status: RecordedStep['status'] = 'completed'): RecordedStep {
  return { position, sequence, status, name: `s${position}`, result: `r${position}`, error: null, attempts: 1, completedAt: new Date(0), argsHash: null };
}

function hooks(rows: RecordedStep[] = []): JournalHooks & { fetches: [number, number][]; stalls: RecordedStep[] } {
  const fetches: [number, number][] = [];
  const stalls: RecordedStep[] = [];
  return {
    fetches,
    stalls,
    fetch: (from, to) => {
      fetches.push([from, to]);
      return Promise.resolve(rows.filter((r) => r.sequence >= from && r.sequence < to));
    },
    stalled: (due) => stalls.push(due),
    failed: (err) => {
      throw err;
    },
  };
}

/** Lets setImmediate-paced deliveries run. */
const turns = async (n = 10) => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
};

describe('RunJournal', () => {
  it('replays recorded outcomes in their sequence order, letting the code react before the next one', async () => {
    // The first run: position 1 completed first (seq 0), then its reaction (position 2, seq 1), then position 0 (seq 2).
    const journal = new RunJournal([row(0, 2), row(1, 0), row(2, 1)], hooks(), 1000);
    const seen: string[] = [];
    const branch = async () => {
      const first = journal.call();
      const checkpoint = await first.outcome;
      seen.push(`${first.position}`);
      if (first.position === 1) {
        const reaction = journal.call();
        seen.push(`${(await reaction.outcome).position}`);
      }
      return checkpoint.result;
    };
    expect(await Promise.all([branch(), branch()])).toEqual(['r0', 'r1']);
    expect(seen).toEqual(['1', '2', '0']);
    expect(journal.deliveredThrough).toBe(2);
  });

  it('in a live run, an outcome heard ahead of a missing number waits for it: the missing range is read once, gaps are skipped', async () => {
    const h = hooks([row(0, 0)]); // seq 1 is a gap (a writer lost the race)
    const journal = new RunJournal([], h, 1000);
    const a = journal.call();
    const b = journal.call();
    const order: number[] = [];
    void a.outcome.then((c) => order.push(c.position));
    void b.outcome.then((c) => order.push(c.position));
    journal.record(row(1, 2) as StepCheckpoint);
    await turns();
    expect(h.fetches).toEqual([[0, 2]]);
    expect(order).toEqual([0, 1]);
    journal.record(row(0, 0) as StepCheckpoint); // heard late, from its own job: a duplicate
    await turns();
    expect(order).toEqual([0, 1]);
  });

  it('in order, no read is needed', async () => {
    const h = hooks();
    const journal = new RunJournal([], h, 1000);
    const a = journal.call();
    journal.record(row(0, 0) as StepCheckpoint);
    expect((await a.outcome).result).toBe('r0');
    const b = journal.call();
    journal.record(row(1, 1) as StepCheckpoint);
    expect((await b.outcome).result).toBe('r1');
    expect(h.fetches).toEqual([]);
  });

  it('a retrying row keeps its turn: later outcomes wait for its new outcome', async () => {
    const journal = new RunJournal([row(0, 0, 'retrying'), row(1, 1)], hooks(), 1000);
    const a = journal.call();
    const b = journal.call();
    expect(a.recorded?.status).toBe('retrying');
    const order: number[] = [];
    void b.outcome.then(() => order.push(1));
    await turns();
    expect(order).toEqual([]);
    journal.record({ ...row(0, 0), result: 'again' } as StepCheckpoint);
    expect((await a.outcome).result).toBe('again');
    await turns();
    expect(order).toEqual([1]);
  });

  it('reports a due outcome whose step the code does not call', async () => {
    const h = hooks();
    const journal = new RunJournal([row(0, 1), row(1, 0)], h, 0);
    journal.call(); // position 0 only; position 1's outcome is due first
    for (let i = 0; i < 100 && h.stalls.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(h.stalls.map((s) => s.position)).toEqual([1]);
  });

  it('tells which step failures an error carries (itself, its cause chain, an AggregateError)', () => {
    const journal = new RunJournal([], hooks(), 1000);
    const a = new Error('a');
    const b = new Error('b');
    journal.noteFailure(a, 3);
    journal.noteFailure(b, 5);
    expect(journal.endedBy(a)).toEqual([3]);
    expect(journal.endedBy(new Error('wrapped', { cause: b }))).toEqual([5]);
    expect(journal.endedBy(new AggregateError([b, new Error('other'), a]))).toEqual([3, 5]);
    expect(journal.endedBy(new Error('own'))).toEqual([]);
  });

  it('close(error) rejects the calls still waiting; nothing is delivered after close()', async () => {
    const journal = new RunJournal([row(0, 0)], hooks(), 1000);
    journal.close();
    const a = journal.call();
    await turns();
    const stop = new Error('stopped');
    journal.close(stop);
    await expect(a.outcome).rejects.toBe(stop);
  });
});
