/** How a `CallBatcher` forms and recovers its batches. */
export interface CallBatcherOptions<A> {
  /** At most this many calls per batch (100). */
  max?: number;
  /**
   * After a failed batch, answer each of its calls with `single` instead of failing them all: always (true), or for
   * the errors this returns true for (statements where one request's row, such as a constraint violation, or a
   * wait the statement gave up, fails the rest). False by default.
   */
  retrySingly?: boolean | ((err: unknown) => boolean);
  /** Calls with the same identity never share a batch: the later ones are answered by `single` on their own. */
  identity?: (args: A) => string;
}

/**
 * Coalesces the calls made in one turn of the event loop into one batch: the first call schedules a flush with
 * `setImmediate` (after the I/O callbacks of this turn, so jobs or requests that arrived together share a
 * statement, and a lone call waits for nothing), at most `max` calls per batch. `run` answers each call by its
 * index; a call it leaves unanswered (undefined) is answered by `single` on its own. A batch that fails fails each
 * of its calls, unless `retrySingly` says to answer each with `single`.
 */
export class CallBatcher<A, R> {
  private pending: Array<{ args: A; resolve: (value: R) => void; reject: (err: unknown) => void }> = [];
  private scheduled = false;
  private readonly max: number;

  constructor(
    private readonly run: (args: A[]) => Promise<Array<R | undefined>>,
    private readonly single: (args: A) => Promise<R>,
    private readonly options: CallBatcherOptions<A> = {},
  ) {
    this.max = options.max ?? 100;
  }

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
    const batch = this.distinct(this.pending.splice(0));
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
        const retry = this.options.retrySingly;
        const singly = typeof retry === 'function' ? retry(err) : retry === true;
        for (const b of batch) {
          if (singly) this.single(b.args).then(b.resolve, b.reject);
          else b.reject(err);
        }
      },
    );
  }

  /** The calls whose identity no earlier call of the batch has; the others go on their own at once. */
  private distinct(calls: CallBatcher<A, R>['pending']): CallBatcher<A, R>['pending'] {
    const identity = this.options.identity;
    if (!identity || calls.length < 2) return calls;
    const seen = new Set<string>();
    return calls.filter((c) => {
      const id = identity(c.args);
      if (!seen.has(id)) {
        seen.add(id);
        return true;
      }
      this.single(c.args).then(c.resolve, c.reject);
      return false;
    });
  }
}
