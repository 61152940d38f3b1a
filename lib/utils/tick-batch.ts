/**
 * Collects what callers add while the current tick runs (every request whose turn came in the same burst of I/O
 * callbacks and promise continuations) and hands it over as one list when the tick ends, or as soon as `maxSize`
 * items are waiting. A caller alone in its tick is handed over alone, without waiting for anything.
 */
export class TickBatch<T> {
  private pending: T[] = [];

  constructor(
    private readonly maxSize: number,
    private readonly flush: (items: T[]) => void,
  ) {}

  add(item: T): void {
    if (this.pending.length === 0) process.nextTick(() => this.drain());
    this.pending.push(item);
    if (this.pending.length >= this.maxSize) this.drain();
  }

  private drain(): void {
    if (this.pending.length === 0) return;
    const items = this.pending;
    this.pending = [];
    this.flush(items);
  }
}
