/**
 * Group commit: items handed in while a write is under way wait and go together in the next write.
 * The first item is written at once (no timer, no added latency when idle); under load the groups grow
 * by themselves to whatever arrived during one write, so N results cost about N / group-size round
 * trips. Each caller's promise settles with its own group's write.
 */
export class GroupWriter<T, R> {
  private waiting: { item: T; resolve: (result: R) => void; reject: (err: Error) => void }[] = [];
  private writing = false;

  /** `write` gets a group in arrival order and answers one result per item, in the same order. */
  constructor(
    private readonly write: (items: T[]) => Promise<R[]>,
    private readonly maxGroup = 256,
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
        const results = await this.write(group.map((g) => g.item));
        group.forEach((g, i) => g.resolve(results[i]!));
      } catch (err) {
        for (const g of group) g.reject(err as Error);
      }
    }
    this.writing = false;
  }
}
