/**
 * Folds many requests for one signal into few sends. The first request sends at once; requests made
 * while a send is under way, or within `windowMs` of the last one, are folded into one more send when
 * the window ends. Every request is followed by a send that starts after it, at most `windowMs` later,
 * and a busy process sends at most 1000 / windowMs a second, whatever its request rate.
 *
 * Holds no fact in process memory: what it sends is a hint ("look now"). A send that fails, or one a
 * stopping process never makes, costs latency only (the delivery sweeper finds every due row).
 */
export class WakeCoalescer {
  private lastSentAt = Number.NEGATIVE_INFINITY;
  private requested = false;
  private sending: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(
    /** Gets the moment the send was decided (performance.now()), the time the window counts from. */
    private readonly send: (decidedAt: number) => Promise<void>,
    private readonly windowMs: number,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** Asks for a send; returns at once (the send happens in the background). */
  request(): void {
    this.requested = true;
    this.flush();
  }

  /** Sends nothing more (a pending wake-up is dropped) and waits for a send under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.sending;
  }

  private flush(): void {
    if (!this.requested || this.sending || this.timer || this.stopped) return;
    const wait = this.lastSentAt + this.windowMs - performance.now();
    if (wait > 0) {
      this.timer = setTimeout(() => {
        this.timer = null;
        this.flush();
      }, wait);
      // A pending wake-up never keeps a stopping process alive.
      this.timer.unref();
      return;
    }
    this.requested = false;
    this.lastSentAt = performance.now();
    this.sending = this.send(this.lastSentAt)
      .catch(this.onError)
      .finally(() => {
        this.sending = null;
        this.flush();
      });
  }
}
