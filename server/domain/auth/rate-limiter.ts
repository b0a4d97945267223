import type { EntityManager } from '@mikro-orm/postgresql';

export interface RateLimitVerdict {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the current window ends. */
  retryAfterSec: number;
}

const WINDOW_MS = 60_000;

/**
 * Fixed one-minute windows per API key, counted in PostgreSQL with one upsert, so every api process
 * shares the same budget. A limit of 0 turns limiting off. Old windows are pruned now and then.
 */
export class RateLimiter {
  constructor(
    private readonly em: EntityManager,
    private readonly perMinute: number,
  ) {}

  get enabled(): boolean {
    return this.perMinute > 0;
  }

  async hit(keyId: string, now = Date.now()): Promise<RateLimitVerdict> {
    const windowStart = new Date(Math.floor(now / WINDOW_MS) * WINDOW_MS);
    const rows = await this.em.getConnection().execute<{ count: number }[]>(
      `INSERT INTO rate_limit_windows (key_id, window_start, count) VALUES (?, ?, 1)
       ON CONFLICT (key_id, window_start) DO UPDATE SET count = rate_limit_windows.count + 1
       RETURNING count`,
      [keyId, windowStart],
    );
    const count = Number(rows[0]?.count ?? 1);
    if (count === 1 && Math.random() < 0.01) {
      await this.em.getConnection().execute(`DELETE FROM rate_limit_windows WHERE window_start < now() - interval '10 minutes'`);
    }
    return {
      allowed: count <= this.perMinute,
      limit: this.perMinute,
      remaining: Math.max(0, this.perMinute - count),
      retryAfterSec: Math.max(1, Math.ceil((windowStart.getTime() + WINDOW_MS - now) / 1000)),
    };
  }
}
