import type { EntityManager } from '@mikro-orm/postgresql';

export interface RateLimitVerdict {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the current window ends. */
  retryAfterSec: number;
}

/** At most `limit` requests per `windowMs` (one second or one minute); a limit of 0 is no limit. */
export interface RateLimitRule {
  limit: number;
  windowMs: number;
}

/** "100 a second", "600 a minute": for messages and the README. */
export function describeRule(rule: RateLimitRule): string {
  return `${rule.limit} a ${rule.windowMs === 1000 ? 'second' : rule.windowMs === 60_000 ? 'minute' : `${rule.windowMs / 1000} s`}`;
}

/**
 * The row a bucket's window is counted in: the bucket with the window's length (`<key id>/1s`,
 * `callback:<address>/60s`). Two limiters of one key with different windows — a rolling change from
 * RATE_LIMIT_PER_MINUTE to RATE_LIMIT_PER_SECOND, some processes still on the old setting — count apart:
 * a minute's count is never read as a second's (both windows start at hh:mm:00).
 */
export function counterBucket(bucket: string, windowMs: number): string {
  return `${bucket}/${windowMs % 1000 === 0 ? `${windowMs / 1000}s` : `${windowMs}ms`}`;
}

/** The counter upsert: adds `count` hits to a window and answers its total. */
export const COUNT_HITS_SQL =
  'INSERT INTO rate_limit_windows (bucket, window_start, count) VALUES (?, ?, ?) ' +
  'ON CONFLICT (bucket, window_start) DO UPDATE SET count = rate_limit_windows.count + EXCLUDED.count RETURNING count';

/** Windows known full are remembered until there are this many, then the ended ones are forgotten. */
const FULL_WINDOWS_SWEEP_AT = 1_000;

interface Waiter {
  resolve: (position: number) => void;
  reject: (err: unknown) => void;
}

/**
 * Fixed windows per bucket (an API key id, or `callback:<source address>`), counted in PostgreSQL, so
 * every api process shares the same budget. A window's row is named by the bucket and the window's length
 * (counterBucket). Ended windows are deleted by a worker job (RateLimitRetention), not here.
 *
 * Two things spare round trips without changing a verdict: hits of one window that arrive while its
 * upsert is under way are counted together by the next one (`count + n`, each hit taking its place in
 * that range, as if they had been sent one by one); and a window this process saw reach the limit is
 * refused here until it ends, since a count never goes down within its window.
 */
export class RateLimiter {
  private readonly waiting = new Map<string, Waiter[]>();
  private readonly counting = new Set<string>();
  /** `bucket@windowStart` → when that window ends, for windows seen at or past the limit. */
  private readonly fullUntil = new Map<string, number>();

  constructor(
    private readonly em: EntityManager,
    readonly rule: RateLimitRule,
  ) {}

  get enabled(): boolean {
    return this.rule.limit > 0;
  }

  async hit(bucket: string, now = Date.now()): Promise<RateLimitVerdict> {
    const { limit, windowMs } = this.rule;
    const windowStart = Math.floor(now / windowMs) * windowMs;
    const windowEnd = windowStart + windowMs;
    const retryAfterSec = Math.max(1, Math.ceil((windowEnd - now) / 1000));
    const counted = counterBucket(bucket, windowMs);
    const window = `${counted}@${windowStart}`;
    if (this.fullUntil.has(window)) return { allowed: false, limit, remaining: 0, retryAfterSec };
    const count = await new Promise<number>((resolve, reject) => {
      const waiters = this.waiting.get(window);
      if (waiters) waiters.push({ resolve, reject });
      else this.waiting.set(window, [{ resolve, reject }]);
      if (!this.counting.has(window)) void this.countWaiting(window, counted, new Date(windowStart));
    });
    if (count >= limit) this.rememberFull(window, windowEnd, now);
    return { allowed: count <= limit, limit, remaining: Math.max(0, limit - count), retryAfterSec };
  }

  /** Upserts the window's count by the hits waiting, again while more arrive; each hit gets its position. */
  private async countWaiting(window: string, bucket: string, windowStart: Date): Promise<void> {
    this.counting.add(window);
    try {
      for (let waiters = this.waiting.get(window); waiters; waiters = this.waiting.get(window)) {
        this.waiting.delete(window);
        try {
          const rows = await this.em.getConnection().execute<{ count: number }[]>(COUNT_HITS_SQL, [bucket, windowStart, waiters.length]);
          const total = Number(rows[0]?.count ?? waiters.length);
          const first = total - waiters.length + 1;
          waiters.forEach((w, i) => w.resolve(first + i));
        } catch (err) {
          waiters.forEach((w) => w.reject(err));
        }
      }
    } finally {
      this.counting.delete(window);
    }
  }

  private rememberFull(window: string, windowEnd: number, now: number): void {
    if (this.fullUntil.size >= FULL_WINDOWS_SWEEP_AT) {
      for (const [key, end] of this.fullUntil) if (end <= now) this.fullUntil.delete(key);
    }
    if (this.fullUntil.size < FULL_WINDOWS_SWEEP_AT) this.fullUntil.set(window, windowEnd);
  }
}
