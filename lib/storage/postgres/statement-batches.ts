import { TickBatch } from '../../utils/tick-batch';

/** At most this many calls share one statement. */
const MAX_BATCH_SIZE = 100;

interface Pending<In, Out> {
  input: In;
  resolve: (output: Out) => void;
  reject: (error: unknown) => void;
}

/** What a batch statement answered: one entry per input, `undefined` where that input must be sent on its own. */
export type BatchAnswers<Out> = ReadonlyArray<Out | undefined>;

/**
 * Sends the calls made in one tick as one statement: one round trip and one commit for all of them, where each
 * would otherwise pay its own (on a busy instance, that is most of a first-time key's cost). A call alone in its
 * tick goes alone; inputs with the same `identity` never share a statement (the later ones go alone); and when the
 * statement fails for a reason one of its rows may have caused, or gave up a lock wait, every call is made again on
 * its own, so one request's trouble is never another's. Other failures (the connection, the server) are every call's.
 */
export class StatementBatches<In, Out> {
  private readonly pending = new TickBatch<Pending<In, Out>>(MAX_BATCH_SIZE, (items) => void this.send(items));

  constructor(
    private readonly alone: (input: In) => Promise<Out>,
    private readonly together: (inputs: In[]) => Promise<BatchAnswers<Out>>,
    private readonly identity: (input: In) => string,
  ) {}

  run(input: In): Promise<Out> {
    return new Promise<Out>((resolve, reject) => this.pending.add({ input, resolve, reject }));
  }

  private async send(items: Array<Pending<In, Out>>): Promise<void> {
    const batch: Array<Pending<In, Out>> = [];
    const seen = new Set<string>();
    for (const item of items) {
      const identity = this.identity(item.input);
      if (seen.has(identity)) this.sendAlone(item);
      else {
        seen.add(identity);
        batch.push(item);
      }
    }
    if (batch.length === 1) return this.sendAlone(batch[0]);
    let answers: BatchAnswers<Out>;
    try {
      answers = await this.together(batch.map((item) => item.input));
    } catch (error) {
      if (isRowLevelFailure(error)) batch.forEach((item) => this.sendAlone(item));
      else batch.forEach((item) => item.reject(error));
      return;
    }
    batch.forEach((item, i) => {
      const answer = answers[i];
      if (answer === undefined) this.sendAlone(item);
      else item.resolve(answer);
    });
  }

  private sendAlone(item: Pending<In, Out>): void {
    this.alone(item.input).then(item.resolve, item.reject);
  }
}

/**
 * A Postgres error one row of a statement can cause (data exceptions, integrity violations), or a wait it gave up
 * (lock timeout, deadlock, serialization failure): the statement changed nothing, and its rows may fare better alone.
 */
export function isRowLevelFailure(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return false;
  return code.startsWith('22') || code.startsWith('23') || code.startsWith('40') || code === '55P03';
}
