/**
 * Group commit: items handed in while a write is under way wait and go together in the next write.
 * The first item is written at once (no timer, no added latency when idle); under load the groups grow
 * by themselves to whatever arrived during one write, so N results cost about N / group-size round
 * trips. Each caller's promise settles with its own group's write.
 */
export class GroupWriter<T, R> {
  private waiting: { item: T; resolve: (result: R) => void; reject: (err: Error) => void }[] = [];
  private writing = false;

  /**
   * `write` gets a group in arrival order and answers one result per item, in the same order. A write
   * that throws is tried again after each of `retry.delaysMs` (only for a write that is safe to repeat
   * whether or not the failed one took effect) before the group's callers get its error: one failure
   * would otherwise fail every item of the group.
   */
  constructor(
    private readonly write: (items: T[]) => Promise<R[]>,
    private readonly maxGroup = 256,
    private readonly retry: { delaysMs: readonly number[]; onRetry: (err: Error, tryNumber: number, groupSize: number) => void } = { delaysMs: [], onRetry: () => undefined },
  ) {}

  add(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      if (!this.writing) void this.writeAll();
    });
  }

  private async writeAll(): Promise<void> {
    this.writing = true;
    while (this.waiting.length > 0) {
      const group = this.waiting.splice(0, this.maxGroup);
      try {
        const results = await this.writeWithRetries(group.map((g) => g.item));
        group.forEach((g, i) => g.resolve(results[i]!));
      } catch (err) {
        for (const g of group) g.reject(err as Error);
      }
    }
    this.writing = false;
  }

  private async writeWithRetries(items: T[]): Promise<R[]> {
    for (let tryNumber = 1; ; tryNumber++) {
      try {
        return await this.write(items);
      } catch (err) {
        const delayMs = this.retry.delaysMs[tryNumber - 1];
        if (delayMs === undefined) throw err;
        this.retry.onRetry(err as Error, tryNumber, items.length);
        await new Promise((resolve) => setTimeout(resolve, delayMs));
      }
    }
  }
}
