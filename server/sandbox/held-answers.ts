import type { Response } from 'express';

/** How long a "hang" lasts: longer than any provider timeout the service uses. */
const HANG_MS = 120_000;

/**
 * The answers a simulator is holding back ("hang" mode), so that stopping the service ends them: the
 * provider's process goes away with it. Otherwise a held answer keeps its connection busy, and the stop
 * waits for the shutdown deadline (or for the client to drop a socket it may keep for its keep-alive time).
 */
export class HeldAnswers {
  private readonly open = new Set<Response>();

  hold(res: Response): void {
    const timer = setTimeout(() => res.destroy(), HANG_MS);
    this.open.add(res);
    res.on('close', () => {
      clearTimeout(timer);
      this.open.delete(res);
    });
  }

  /** How many answers are held now. */
  get size(): number {
    return this.open.size;
  }

  releaseAll(): void {
    for (const res of this.open) res.destroy();
  }
}
