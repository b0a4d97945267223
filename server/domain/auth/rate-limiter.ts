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
 * Fixed windows per bucket (an API key id, or `callback:<source address>`), counted in PostgreSQL with
 * one upsert, so every api process shares the same budget. Old windows are pruned now and then.
 */
export class RateLimiter {
  constructor(
    private readonly em: EntityManager,
    readonly rule: RateLimitRule,
  ) {}

  get enabled(): boolean {
    return this.rule.limit > 0;
  }

  async hit(bucket: string, now = Date.now()): Promise<RateLimitVerdict> {
    const { limit, windowMs } = this.rule;
    const windowStart = new Date(Math.floor(now / windowMs) * windowMs);
    const rows = await this.em.getConnection().execute<{ count: number }[]>(
      `INSERT INTO rate_limit_windows (bucket, window_start, count) VALUES (?, ?, 1)
       ON CONFLICT (bucket, window_start) DO UPDATE SET count = rate_limit_windows.count + 1
       RETURNING count`,
      [bucket, windowStart],
    );
    const count = Number(rows[0]?.count ?? 1);
    if (count === 1 && Math.random() < 0.01) {
      await this.em.getConnection().execute(`DELETE FROM rate_limit_windows WHERE window_start < now() - interval '10 minutes'`);
    }
    return {
      allowed: count <= limit,
      limit,
      remaining: Math.max(0, limit - count),
      retryAfterSec: Math.max(1, Math.ceil((windowStart.getTime() + windowMs - now) / 1000)),
    };
  }
}
