import type { RecordedStep } from './storage/workflow.store';
import type { StepCheckpoint } from './workflow.interfaces';

/** @internal What the journal needs from outside: reading committed rows, and reporting a stuck or failed replay. */
export interface JournalHooks {
  /** The journal rows with `from <= sequence < to`. */
  fetch(from: number, to: number): Promise<RecordedStep[]>;
  /** The outcome due next belongs to a position the workflow code did not call within the grace period. */
  stalled(due: RecordedStep): void;
  /** `fetch` failed (after its own retries). */
  failed(err: unknown): void;
}

/** @internal One step call, as the journal hands it out. */
export interface JournalCall {
  position: number;
  /** The row recorded at this position when the run began (a checkpoint, or a `retrying` failure), if any. */
  recorded: RecordedStep | undefined;
  /** Settles with the step's checkpoint when it is this outcome's turn; rejects when the run stops first. */
  outcome: Promise<StepCheckpoint>;
}

interface PendingCall {
  resolve(checkpoint: StepCheckpoint): void;
  reject(err: unknown): void;
}

/**
 * @internal What one run of an execution consumes: its step calls (each gets the next position, synchronously) and
 * the recorded outcomes, which it hands to the workflow code strictly in their recorded sequence order, one at a
 * time, letting the code react (a macrotask turn drains its continuations) before the next — in the first run as
 * well as on every replay. So the code makes the same calls in the same order, and gets the same positions, however
 * the first run's steps raced (Temporal delivers activity completions the same way).
 *
 * Sequence numbers become visible in order but may have gaps (a writer that lost a race). An outcome heard ahead of
 * a number not yet known makes the journal read the missing range once: it is committed, so the read is complete.
 */
export class RunJournal {
  private nextPosition = 0;
  private readonly recorded = new Map<number, RecordedStep>();
  private readonly pending = new Map<number, PendingCall>();
  /** Outcomes not yet delivered, by sequence number. */
  private readonly arrived = new Map<number, StepCheckpoint>();
  /** `retrying` rows (resume): their new outcome keeps the number. */
  private readonly reserved = new Map<number, RecordedStep>();
  /** The next sequence number to deliver. */
  private frontier = 0;
  /** Every number up to this one is delivered, arrived, reserved, or a gap. */
  private knownThrough = -1;
  private wantThrough = -1;
  private delivered = -1;
  private closed = false;
  private scheduled = false;
  private fetching = false;
  private grace: NodeJS.Timeout | undefined;
  private readonly failures = new WeakMap<object, number>();

  constructor(recorded: readonly RecordedStep[], private readonly hooks: JournalHooks, private readonly graceMs: number) {
    for (const row of recorded) {
      this.recorded.set(row.position, row);
      this.add(row);
      this.knownThrough = Math.max(this.knownThrough, row.sequence);
    }
  }

  /** The highest sequence number delivered to the workflow code (-1: none). */
  get deliveredThrough(): number {
    return this.delivered;
  }

  /** True when nothing is waiting to be delivered or read: the workflow code has received all that has arrived. */
  get isQuiet(): boolean {
    return this.arrived.size === 0 && !this.scheduled && !this.fetching;
  }

  /** A step call: takes the next position; its outcome comes through `record` (or was recorded before the run). */
  call(): JournalCall {
    const position = this.nextPosition++;
    const outcome = new Promise<StepCheckpoint>((resolve, reject) => this.pending.set(position, { resolve, reject }));
    outcome.catch(() => undefined); // a call that failed before awaiting it (DeterminismError) must not leave it unhandled
    this.schedule();
    return { position, recorded: this.recorded.get(position), outcome };
  }

  /** A step's checkpoint, heard from its job, an event or Postgres; delivered in its turn (duplicates are ignored). */
  record(checkpoint: StepCheckpoint): void {
    const seq = checkpoint.sequence;
    if (this.closed || seq < this.frontier || this.arrived.has(seq)) return;
    this.add(checkpoint);
    // `seq` is committed, so is every smaller number: read the ones not known yet.
    if (seq - 1 <= this.knownThrough) this.knownThrough = Math.max(this.knownThrough, seq);
    else {
      this.wantThrough = Math.max(this.wantThrough, seq);
      void this.fetchMissing();
    }
    this.schedule();
  }

  /** Remembers which position a thrown `StepFailedError` came from, to tell later whether it ended the run. */
  noteFailure(error: object, position: number): void {
    this.failures.set(error, position);
  }

  /** Positions of the step failures an error carries (itself, its `cause` chain, an `AggregateError`'s `errors`). */
  endedBy(error: unknown): number[] {
    const positions = new Set<number>();
    const seen = new Set<object>();
    const visit = (value: unknown, depth: number): void => {
      if (depth > 16 || typeof value !== 'object' || value === null || seen.has(value)) return;
      seen.add(value);
      const position = this.failures.get(value);
      if (position !== undefined) positions.add(position);
      visit((value as { cause?: unknown }).cause, depth + 1);
      const errors = (value as { errors?: unknown }).errors;
      if (Array.isArray(errors)) for (const item of errors) visit(item, depth + 1);
    };
    visit(error, 0);
    return [...positions].sort((a, b) => a - b);
  }

  /** No further delivery (the workflow function settled, or the run stopped); with an error, pending calls reject. */
  close(error?: unknown): void {
    this.closed = true;
    this.clearGrace();
    if (error === undefined) return;
    const pending = [...this.pending.values()];
    this.pending.clear();
    for (const call of pending) call.reject(error);
  }

  private add(row: RecordedStep): void {
    if (row.sequence < this.frontier || this.arrived.has(row.sequence)) return;
    if (row.status === 'retrying') {
      this.reserved.set(row.sequence, row);
    } else {
      this.reserved.delete(row.sequence);
      this.arrived.set(row.sequence, row);
    }
  }

  private async fetchMissing(): Promise<void> {
    if (this.fetching) return;
    this.fetching = true;
    try {
      while (!this.closed && this.wantThrough > this.knownThrough) {
        const to = this.wantThrough;
        for (const row of await this.hooks.fetch(this.knownThrough + 1, to)) this.add(row);
        this.knownThrough = Math.max(this.knownThrough, to);
        this.schedule();
      }
    } catch (err) {
      this.hooks.failed(err);
    } finally {
      this.fetching = false;
    }
  }

  /** The next delivery runs on a later macrotask: the code's reactions to the previous one (microtasks) come first. */
  private schedule(): void {
    if (this.scheduled || this.closed) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.deliverNext();
    });
  }

  private deliverNext(): void {
    if (this.closed) return;
    while (this.frontier <= this.knownThrough && !this.arrived.has(this.frontier) && !this.reserved.has(this.frontier)) this.frontier++;
    const due = this.arrived.get(this.frontier) ?? this.reserved.get(this.frontier);
    if (!due) return this.clearGrace();
    const call = this.pending.get(due.position);
    if (!call) return this.startGrace(due);
    this.clearGrace();
    if (due.status === 'retrying') return; // called: its new outcome is on its way and keeps this number
    this.arrived.delete(this.frontier);
    this.pending.delete(due.position);
    this.delivered = this.frontier++;
    call.resolve(due);
    this.schedule();
  }

  private startGrace(due: RecordedStep): void {
    if (this.grace) return;
    this.grace = setTimeout(() => {
      this.grace = undefined;
      if (!this.closed && !this.pending.has(due.position)) this.hooks.stalled(due);
    }, this.graceMs);
    this.grace.unref();
  }

  private clearGrace(): void {
    clearTimeout(this.grace);
    this.grace = undefined;
  }
}
