/**
 * Coalesces the calls made in one turn of the event loop into one batch: the first call schedules a flush with
 * `setImmediate` (after the I/O callbacks of this turn, so jobs that arrived together share a statement, and a lone
 * call waits for nothing), at most `max` calls per batch. `run` answers each call by its index; a call it leaves
 * unanswered (undefined) is answered by `single` on its own. A batch that fails fails each of its calls, or, with
 * `retrySingly` (for statements where one request's error, such as a constraint violation, would fail the rest), has
 * each call answered by `single`.
 */
export class CallBatcher<A, R> {
  private pending: Array<{ args: A; resolve: (value: R) => void; reject: (err: unknown) => void }> = [];
  private scheduled = false;

  constructor(
    private readonly run: (args: A[]) => Promise<Array<R | undefined>>,
    private readonly single: (args: A) => Promise<R>,
    private readonly max = 100,
    private readonly retrySingly = false,
  ) {}

  call(args: A): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.pending.push({ args, resolve, reject });
      if (this.pending.length >= this.max) this.flush();
      else if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    const batch = this.pending.splice(0);
    if (batch.length === 0) return;
    if (batch.length === 1) {
      this.single(batch[0].args).then(batch[0].resolve, batch[0].reject);
      return;
    }
    this.run(batch.map((b) => b.args)).then(
      (results) => {
        batch.forEach((b, i) => {
          const result = results[i];
          if (result === undefined) this.single(b.args).then(b.resolve, b.reject);
          else b.resolve(result);
        });
      },
      (err: unknown) => {
        for (const b of batch) {
          if (this.retrySingly) this.single(b.args).then(b.resolve, b.reject);
          else b.reject(err);
        }
      },
    );
  }
}
